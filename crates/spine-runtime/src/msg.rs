//! Active messages an invocation sends (`spine_msg_send` to a host endpoint,
//! `spine_msg_post` to the handlers of the sender's domain): kept in a fixed outbox the
//! runner owns, so the helpers allocate nothing; the adapter drains it after the run and
//! delivers each message (a posted one later, from its own queue).

/// Largest payload of a small active message.
pub const MSG_MAX: usize = spine_abi::spine_msg_md::MSG_MAX as usize;

/// Messages one burst of invocations may send before `spine_msg_send` answers
/// `-ENOSPC`: one for each packet of a default burst (32) and as many again (about
/// 16 KiB per runner).
pub const OUTBOX_SLOTS: usize = 64;

/// A handler's `source` for a message an extension posted (`spine_msg_post`): this bit
/// with the sending extension's id in the low 16 bits (endpoint ids stay below it).
pub const SOURCE_EXTENSION: u32 = 0x8000_0000;

/// A handler's `source` for a message that came from another adapter over a tunnel
/// port: this bit, the tunnel port's index in bits 16..30 and the peer's claimed sender
/// in the low 16 bits. `spine_msg_send` to such a source sends the message back out of
/// that tunnel port, addressed to the claimed sender (an endpoint id over there).
pub const SOURCE_REMOTE: u32 = 0x4000_0000;

/// Where a message goes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Dest {
    /// The host endpoint with this id (`spine_msg_send`).
    Endpoint(u32),
    /// Handler `handler` of every extension of the sender's domain (`spine_msg_post`).
    Handlers,
    /// Handler `handler` of the one extension of the sender's domain with this id
    /// (`spine_msg_post_to`; the host checked it exists in that domain when it was
    /// posted).
    Extension(u16),
}

/// One message an invocation sent.
#[derive(Debug, Clone, Copy)]
pub struct OutMsg {
    pub to: Dest,
    pub handler: u8,
    len: u8,
    data: [u8; MSG_MAX],
    /// For a bulk message (`spine_msg_send_bulk`): its reference, offset and length
    /// (at least 1) in the destination endpoint's buffer area; `bulk_len` 0 otherwise.
    bulk_off: u64,
    bulk_len: u32,
    /// For a delayed post (`spine_msg_post_to` with a delay): CLOCK_MONOTONIC time, in
    /// nanoseconds, before which its handler must not run; 0 otherwise.
    due_ns: u64,
}

impl OutMsg {
    /// A message of `data` (`None` when longer than [`MSG_MAX`]).
    pub fn new(to: Dest, handler: u8, data: &[u8]) -> Option<OutMsg> {
        let mut m =
            OutMsg { to, handler, len: 0, data: [0; MSG_MAX], bulk_off: 0, bulk_len: 0, due_ns: 0 };
        m.data.get_mut(..data.len())?.copy_from_slice(data);
        m.len = data.len() as u8;
        Some(m)
    }

    pub fn payload(&self) -> &[u8] {
        &self.data[..usize::from(self.len)]
    }

    /// A delayed post's due time (CLOCK_MONOTONIC nanoseconds; `None`: not delayed).
    pub fn due_ns(&self) -> Option<u64> {
        (self.due_ns != 0).then_some(self.due_ns)
    }

    /// Makes this a post due at `due_ns` (0: not delayed).
    pub fn set_due_ns(&mut self, due_ns: u64) {
        self.due_ns = due_ns;
    }

    /// A bulk message's reference (offset, length) in its endpoint's area; `None` for a
    /// small message.
    pub fn bulk(&self) -> Option<(u64, u32)> {
        (self.bulk_len > 0).then_some((self.bulk_off, self.bulk_len))
    }
}

/// The messages sent since the runner's last burst began.
#[derive(Debug)]
pub struct Outbox {
    msgs: Box<[OutMsg; OUTBOX_SLOTS]>,
    len: usize,
}

impl Default for Outbox {
    fn default() -> Self {
        let empty = OutMsg {
            to: Dest::Handlers,
            handler: 0,
            len: 0,
            data: [0; MSG_MAX],
            bulk_off: 0,
            bulk_len: 0,
            due_ns: 0,
        };
        Outbox { msgs: Box::new([empty; OUTBOX_SLOTS]), len: 0 }
    }
}

impl Outbox {
    /// Queues a message; `Err` with the helper's errno (positive) when `data` is longer
    /// than [`MSG_MAX`] (`E2BIG`) or the outbox is full (`ENOSPC`).
    pub(crate) fn push(&mut self, to: Dest, handler: u8, data: &[u8]) -> Result<(), i64> {
        self.push_due(to, handler, data, 0)
    }

    /// Whether the outbox has no room for another message.
    pub(crate) fn is_full(&self) -> bool {
        self.len == OUTBOX_SLOTS
    }

    /// [`Outbox::push`] of a post due at `due_ns` (CLOCK_MONOTONIC; 0: not delayed).
    pub(crate) fn push_due(
        &mut self,
        to: Dest,
        handler: u8,
        data: &[u8],
        due_ns: u64,
    ) -> Result<(), i64> {
        if data.len() > MSG_MAX {
            return Err(spine_abi::errno::E2BIG);
        }
        let Some(slot) = self.msgs.get_mut(self.len) else {
            return Err(spine_abi::errno::ENOSPC);
        };
        slot.to = to;
        slot.handler = handler;
        slot.len = data.len() as u8;
        slot.data[..data.len()].copy_from_slice(data);
        slot.bulk_len = 0;
        slot.due_ns = due_ns;
        self.len += 1;
        Ok(())
    }

    /// Queues a bulk message: a reference to `len` (at least 1) bytes at `off` of the
    /// destination endpoint's area, no payload; `Err(ENOSPC)` when the outbox is full.
    pub(crate) fn push_bulk(
        &mut self,
        to: Dest,
        handler: u8,
        off: u64,
        len: u32,
    ) -> Result<(), i64> {
        let Some(slot) = self.msgs.get_mut(self.len) else {
            return Err(spine_abi::errno::ENOSPC);
        };
        slot.to = to;
        slot.handler = handler;
        slot.len = 0;
        slot.bulk_off = off;
        slot.bulk_len = len.max(1);
        slot.due_ns = 0;
        self.len += 1;
        Ok(())
    }

    pub fn messages(&self) -> &[OutMsg] {
        &self.msgs[..self.len]
    }

    pub fn clear(&mut self) {
        self.len = 0;
    }
}

/// The handler number of a program in section `spine/handler/N` (N decimal, 0..=255).
pub fn handler_of_section(section: &str) -> Option<u8> {
    let n = section.strip_prefix("spine/handler/")?;
    if n.is_empty() || n.len() > 3 || !n.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    n.parse().ok()
}

/// The endpoint hook an applet attaches to.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum AppletHook {
    /// `doTx`: each frame the endpoint's client transmits, before it leaves.
    Tx,
    /// `doRx`: each frame about to be delivered to the endpoint.
    Rx,
    /// A periodic tick (timers: retransmissions, acknowledgements), on a blank frame
    /// the applet may fill and send.
    Tick,
}

/// The hook of an endpoint applet in section `spine/applet/tx` or `spine/applet/rx`.
pub fn applet_of_section(section: &str) -> Option<AppletHook> {
    match section {
        "spine/applet/tx" => Some(AppletHook::Tx),
        "spine/applet/rx" => Some(AppletHook::Rx),
        "spine/applet/tick" => Some(AppletHook::Tick),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn applet_sections_are_tx_and_rx() {
        assert_eq!(applet_of_section("spine/applet/tx"), Some(AppletHook::Tx));
        assert_eq!(applet_of_section("spine/applet/rx"), Some(AppletHook::Rx));
        assert_eq!(applet_of_section("spine/applet/tick"), Some(AppletHook::Tick));
        assert_eq!(applet_of_section("spine/applet/"), None);
        assert_eq!(applet_of_section("spine/applet/txx"), None);
        assert_eq!(applet_of_section("spine/handler/7"), None);
    }

    #[test]
    fn handler_sections_name_0_to_255() {
        assert_eq!(handler_of_section("spine/handler/7"), Some(7));
        assert_eq!(handler_of_section("spine/handler/255"), Some(255));
        assert_eq!(handler_of_section("spine/handler/256"), None);
        assert_eq!(handler_of_section("spine/handler/"), None);
        assert_eq!(handler_of_section("spine/handler/+1"), None);
        assert_eq!(handler_of_section("spine/msg"), None);
    }

    #[test]
    fn the_outbox_holds_64_messages_of_240_bytes() {
        let mut o = Outbox::default();
        assert_eq!(o.push(Dest::Endpoint(1), 2, &[0; 241]), Err(spine_abi::errno::E2BIG));
        for i in 0..OUTBOX_SLOTS as u32 {
            let to = if i % 2 == 0 { Dest::Endpoint(i) } else { Dest::Handlers };
            o.push(to, 7, &[i as u8; MSG_MAX]).unwrap();
        }
        assert_eq!(o.push(Dest::Handlers, 7, b"x"), Err(spine_abi::errno::ENOSPC));
        assert_eq!(o.messages()[4].to, Dest::Endpoint(4));
        assert_eq!(o.messages()[5].to, Dest::Handlers);
        assert_eq!(o.messages()[3].payload(), &[3u8; MSG_MAX][..]);
        o.clear();
        assert!(o.messages().is_empty());
    }
}
