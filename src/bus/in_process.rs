//! The bus of a single instance: a broadcast channel in memory.

use tokio::sync::broadcast;

use super::{Bus, BusEvent, Envelope, InstanceId, Message, Subscription};

/// Messages a slow subscriber may fall behind by before it starts losing
/// the oldest (it then catches up from the database, as after any loss).
const CAPACITY: usize = 1024;

#[derive(Debug)]
pub struct InProcessBus {
    instance: InstanceId,
    sender: broadcast::Sender<BusEvent>,
}

impl InProcessBus {
    pub fn new(instance: InstanceId) -> Self {
        let (sender, _) = broadcast::channel(CAPACITY);
        Self { instance, sender }
    }
}

impl Bus for InProcessBus {
    fn instance(&self) -> &InstanceId {
        &self.instance
    }

    fn spans_instances(&self) -> bool {
        false
    }

    fn publish(&self, message: Message) {
        // No subscriber is not an error: nobody needed telling.
        let _ = self.sender.send(BusEvent::Message(Envelope {
            origin: self.instance.clone(),
            message,
        }));
    }

    fn subscribe(&self) -> Subscription {
        Subscription::new(self.sender.subscribe())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn subscribers_get_what_is_published_after_they_subscribe() {
        let bus = InProcessBus::new(InstanceId("i1".into()));
        bus.publish(Message::PresenceChanged {
            endpoint_id: "before".into(),
        });
        let mut sub = bus.subscribe();
        bus.publish(Message::EndpointRevoked {
            endpoint_id: "ep_1".into(),
        });
        let Some(BusEvent::Message(got)) = sub.next().await else {
            panic!("a message");
        };
        assert_eq!(got.origin, InstanceId("i1".into()));
        assert_eq!(
            got.message,
            Message::EndpointRevoked {
                endpoint_id: "ep_1".into()
            }
        );
        assert_eq!(
            sub.try_next(),
            None,
            "what came before subscribing is not replayed"
        );
    }

    #[test]
    fn payloads_are_ids_only_and_small() {
        let m = Message::TransitionClaimed {
            endpoint_id: "ep_0192f0c4c0a87b3e9d1c2b3a4f5e6d7c".into(),
            presence: Presence::In,
            digest: Some(crate::domain::doorbell::DigestReason::ShiftStart),
            instance: InstanceId("0192f0c4c0a87b3e9d1c2b3a4f5e6d7c".into()),
        };
        let text = serde_json::to_string(&m).unwrap();
        assert!(text.len() < 200, "{text}");
        assert_eq!(serde_json::from_str::<Message>(&text).unwrap(), m);
    }

    use crate::domain::presence::Presence;
}
