//! CIDR blocks (`10.0.0.0/8`, `fd00::/8`, or a bare address) for
//! `--trusted-proxy`: small enough not to need a crate.

use std::net::IpAddr;

/// An address block. IPv4-mapped IPv6 peers (`::ffff:10.0.0.1`) are matched
/// as the IPv4 address they carry.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Cidr {
    network: IpAddr,
    prefix: u8,
}

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{0:?}: expected an address or a CIDR block such as 10.0.0.0/8 or fd00::/8")]
pub struct BadCidr(pub String);

impl std::str::FromStr for Cidr {
    type Err = BadCidr;

    fn from_str(text: &str) -> Result<Self, BadCidr> {
        let bad = || BadCidr(text.to_owned());
        let trimmed = text.trim();
        let (address, prefix) = match trimmed.split_once('/') {
            Some((address, prefix)) => (address, Some(prefix)),
            None => (trimmed, None),
        };
        let network: IpAddr = address.parse().map_err(|_| bad())?;
        let max = if network.is_ipv4() { 32 } else { 128 };
        let prefix = match prefix {
            None => max,
            Some(p) if !p.is_empty() && p.len() <= 3 && p.bytes().all(|b| b.is_ascii_digit()) => {
                p.parse::<u8>().map_err(|_| bad())?
            }
            Some(_) => return Err(bad()),
        };
        if prefix > max {
            return Err(bad());
        }
        Ok(Self {
            network: mask(network, prefix),
            prefix,
        })
    }
}

impl std::fmt::Display for Cidr {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}/{}", self.network, self.prefix)
    }
}

impl Cidr {
    pub fn contains(&self, ip: IpAddr) -> bool {
        let ip = canonical(ip);
        if ip.is_ipv4() != self.network.is_ipv4() {
            return false;
        }
        mask(ip, self.prefix) == self.network
    }
}

/// An IPv4-mapped IPv6 address as the IPv4 address it is.
pub fn canonical(ip: IpAddr) -> IpAddr {
    match ip {
        IpAddr::V6(v6) => v6.to_ipv4_mapped().map_or(ip, IpAddr::V4),
        v4 => v4,
    }
}

fn mask(ip: IpAddr, prefix: u8) -> IpAddr {
    match ip {
        IpAddr::V4(v4) => {
            let bits = u32::from(v4);
            let kept = if prefix == 0 {
                0
            } else {
                bits & (u32::MAX << (32 - prefix))
            };
            IpAddr::V4(kept.into())
        }
        IpAddr::V6(v6) => {
            let bits = u128::from(v6);
            let kept = if prefix == 0 {
                0
            } else {
                bits & (u128::MAX << (128 - prefix))
            };
            IpAddr::V6(kept.into())
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cidr(text: &str) -> Cidr {
        text.parse().unwrap()
    }

    fn ip(text: &str) -> IpAddr {
        text.parse().unwrap()
    }

    #[test]
    fn blocks_contain_their_addresses() {
        let private = cidr("10.0.0.0/8");
        assert!(private.contains(ip("10.255.1.2")));
        assert!(!private.contains(ip("11.0.0.1")));
        assert!(private.contains(ip("::ffff:10.1.2.3")), "IPv4-mapped peers");
        assert!(!private.contains(ip("fd00::1")));
        let host = cidr("192.0.2.7");
        assert!(host.contains(ip("192.0.2.7")));
        assert!(!host.contains(ip("192.0.2.8")));
        let ula = cidr("fd00::/8");
        assert!(ula.contains(ip("fd12:3456::1")));
        assert!(!ula.contains(ip("fe80::1")));
        assert!(cidr("0.0.0.0/0").contains(ip("203.0.113.1")));
        assert!(cidr("::/0").contains(ip("2001:db8::1")));
        assert!(
            cidr("127.0.0.1/8").contains(ip("127.9.9.9")),
            "host bits are masked"
        );
        assert_eq!(cidr("127.0.0.1/8").to_string(), "127.0.0.0/8");
        assert!(cidr("::1").contains(ip("::1")));
    }

    #[test]
    fn malformed_blocks_are_refused() {
        for bad in [
            "",
            "10.0.0.0/33",
            "fd00::/129",
            "10.0.0.0/",
            "10.0.0/8",
            "10.0.0.0/-1",
            "x",
            "10.0.0.0/8/8",
            "10.0.0.0/ 8",
        ] {
            assert_eq!(bad.parse::<Cidr>(), Err(BadCidr(bad.to_owned())), "{bad}");
        }
    }
}
