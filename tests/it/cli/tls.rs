//! The CLI over `https://`: a private certificate authority made here
//! (rcgen), a TLS terminator in front of the real server (tokio-rustls, as a
//! reverse proxy would be), and the real binary as the client, trusting the
//! authority through `SWITCHBOARD_CA_CERT`.

use std::net::SocketAddr;
use std::path::Path;
use std::process::{Command, Output, Stdio};
use std::sync::Arc;

use rcgen::{BasicConstraints, CertificateParams, IsCa, KeyPair};
use tokio::net::{TcpListener, TcpStream};
use tokio_rustls::TlsAcceptor;
use tokio_rustls::rustls::{self, pki_types};

use crate::support::server::{BIN, Process};

/// A CA (its PEM) and a server certificate for 127.0.0.1 that it signed.
struct Pki {
    ca_pem: String,
    server: rustls::ServerConfig,
}

fn pki() -> Pki {
    let ca_key = KeyPair::generate().unwrap();
    let mut ca_params = CertificateParams::new(Vec::<String>::new()).unwrap();
    ca_params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
    let ca = ca_params.self_signed(&ca_key).unwrap();
    let key = KeyPair::generate().unwrap();
    let cert = CertificateParams::new(vec!["127.0.0.1".to_owned()])
        .unwrap()
        .signed_by(&key, &ca, &ca_key)
        .unwrap();
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let server = rustls::ServerConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .unwrap()
        .with_no_client_auth()
        .with_single_cert(
            vec![cert.der().clone()],
            pki_types::PrivateKeyDer::Pkcs8(key.serialize_der().into()),
        )
        .unwrap();
    Pki {
        ca_pem: ca.pem(),
        server,
    }
}

/// Terminates TLS on a free loopback port and forwards each connection to
/// `backend`, on a runtime thread of its own; it ends with the test process.
fn tls_terminator(server: rustls::ServerConfig, backend: SocketAddr) -> SocketAddr {
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap();
        runtime.block_on(async move {
            let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
            tx.send(listener.local_addr().unwrap()).unwrap();
            let acceptor = TlsAcceptor::from(Arc::new(server));
            loop {
                let Ok((tcp, _)) = listener.accept().await else {
                    return;
                };
                let acceptor = acceptor.clone();
                tokio::spawn(async move {
                    // A refused handshake (the untrusting client) just ends.
                    let Ok(mut tls) = acceptor.accept(tcp).await else {
                        return;
                    };
                    let Ok(mut plain) = TcpStream::connect(backend).await else {
                        return;
                    };
                    let _ = tokio::io::copy_bidirectional(&mut tls, &mut plain).await;
                });
            }
        });
    });
    rx.recv().unwrap()
}

fn login(dir: &Path, url: &str, token: &str, ca_cert: Option<&Path>) -> Output {
    let mut command = Command::new(BIN);
    command
        .current_dir(dir)
        .args(["login", url, "--with-token"])
        .env("SWITCHBOARD_CONFIG_DIR", dir.join("config"))
        .env_remove("SWITCHBOARD_URL")
        .env_remove("SWITCHBOARD_TOKEN")
        .env_remove("SWITCHBOARD_CA_CERT")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    if let Some(path) = ca_cert {
        command.env("SWITCHBOARD_CA_CERT", path);
    }
    let mut child = command.spawn().expect("run switchboard login");
    use std::io::Write;
    writeln!(child.stdin.take().unwrap(), "{token}").unwrap();
    child.wait_with_output().unwrap()
}

#[test]
fn login_and_commands_work_over_https_with_a_private_ca() {
    let dir = tempfile::tempdir().unwrap();
    let server = Process::start(dir.path(), &[]);
    let token = server.first_token().expect("a first-start token");
    let pki = pki();
    let tls = tls_terminator(pki.server, server.addr.parse().unwrap());
    let ca_file = dir.path().join("ca.pem");
    std::fs::write(&ca_file, &pki.ca_pem).unwrap();
    let url = format!("https://{tls}");

    let out = login(dir.path(), &url, &token, Some(&ca_file));
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "login over https failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(stdout.contains("as admin"), "{stdout}");

    // The saved https login serves later commands.
    let status = Command::new(BIN)
        .current_dir(dir.path())
        .args(["status", "--json"])
        .env("SWITCHBOARD_CONFIG_DIR", dir.path().join("config"))
        .env("SWITCHBOARD_CA_CERT", &ca_file)
        .env_remove("SWITCHBOARD_URL")
        .env_remove("SWITCHBOARD_TOKEN")
        .output()
        .unwrap();
    assert!(status.status.success(), "{status:?}");
    let body: serde_json::Value = serde_json::from_slice(&status.stdout).unwrap();
    assert_eq!(body["url"], url.as_str());
    assert_eq!(body["readyz"]["status"], "ready", "{body}");
}

#[test]
fn https_refuses_a_certificate_it_cannot_verify() {
    let dir = tempfile::tempdir().unwrap();
    let server = Process::start(dir.path(), &[]);
    let token = server.first_token().expect("a first-start token");
    let tls = tls_terminator(pki().server, server.addr.parse().unwrap());

    let out = login(dir.path(), &format!("https://{tls}"), &token, None);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{stderr}");
    assert!(stderr.contains("cannot reach"), "{stderr}");
    assert!(!stderr.contains("no TLS"), "{stderr}");
    assert!(!dir.path().join("config/credentials.json").exists());
}

#[test]
fn a_bad_ca_cert_file_is_named_in_the_error() {
    let dir = tempfile::tempdir().unwrap();
    let bogus = dir.path().join("not-a-cert.pem");
    std::fs::write(&bogus, "hello\n").unwrap();
    let token = format!("sbh_{}", "a".repeat(43));
    let out = login(dir.path(), "https://127.0.0.1:9", &token, Some(&bogus));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{stderr}");
    assert!(stderr.contains("SWITCHBOARD_CA_CERT"), "{stderr}");
    assert!(stderr.contains("not-a-cert.pem"), "{stderr}");
}
