//! The API's request and response bodies, shared by the server and the client. Keys
//! and values travel as hex strings (`"0a 00 00 01"`), bytes in memory order, as
//! `bpftool` prints them; any of `"0a000001"`, `"0x0a000001"` and `"0a:00:00:01"` is
//! accepted.

use serde::{Deserialize, Serialize};

pub use spine_adapter::{DomainView, ExtView, MapView, PortView, Totals};

/// The API version every path starts with.
pub const VERSION: &str = "v1";

/// An error, as every non-2xx response carries it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ApiError {
    /// A short stable name: `no_extension`, `no_map`, `map`, `bad_object`,
    /// `load_failed`, `bad_request`, `not_found`, `too_large`, …
    pub kind: String,
    pub message: String,
    /// For map operations: the errno bpf(2) returns for the same condition.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub errno: Option<i64>,
    /// For programs the verifier refused: its log.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub log: Option<String>,
}

/// The body of an error response: `{"error": {...}}`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ErrorBody {
    pub error: ApiError,
}

/// `GET /v1/version`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Version {
    pub api: String,
    pub spine: String,
}

/// `POST /v1/ports/{port}/attach` and `/replace`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct AttachRequest {
    pub extension: String,
}

/// What attach, replace and detach answer.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Attachment {
    pub port: String,
    /// The extension now attached (`None` after a detach).
    pub extension: Option<String>,
    /// The one it replaced or detached.
    pub previous: Option<String>,
}

/// `POST .../lookup`, `.../delete` and `.../next_key` (`key` absent: the first key).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct KeyRequest {
    #[serde(default)]
    pub key: Option<String>,
}

/// `POST .../update`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct UpdateRequest {
    pub key: String,
    pub value: String,
    /// `BPF_ANY` (0), `BPF_NOEXIST` (1) or `BPF_EXIST` (2).
    #[serde(default)]
    pub flags: u64,
}

/// `POST .../lookup_and_delete`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct LookupAndDeleteRequest {
    pub key: String,
    /// 0, or `BPF_F_LOCK` (4): read the value under its `bpf_spin_lock`.
    #[serde(default)]
    pub flags: u64,
}

/// One map entry.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Entry {
    pub key: String,
    pub value: String,
    /// The entry printed from the object's BTF, as `bpftool -j map dump` gives it:
    /// `{"key", "value"}`, or `{"key", "values": [{"cpu", "value"}]}` per CPU. Absent
    /// when the map has no BTF key and value types.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub formatted: Option<serde_json::Value>,
}

/// `POST .../next_key`: `None` after the last key.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct NextKey {
    pub next_key: Option<String>,
}

/// `POST .../pop`: the element a queue or stack gave, `None` when it was empty.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Popped {
    pub value: Option<String>,
}

/// `GET .../entries`: the map and every entry.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Dump {
    pub map: MapView,
    pub entries: Vec<Entry>,
}

/// `POST /v1/trace/start`: events kept per worker (default 65,536).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct TraceRequest {
    #[serde(default)]
    pub events: Option<usize>,
}

/// Bytes as bpftool prints them: `0a 00 00 01`.
pub fn hex(b: &[u8]) -> String {
    spine_adapter::live::hex(b)
}

/// Hex bytes in memory order, with or without `0x`, spaces, colons or underscores.
pub fn unhex(s: &str) -> Option<Vec<u8>> {
    spine_adapter::config::parse_hex(s.trim())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hex_round_trips_in_every_accepted_spelling() {
        assert_eq!(hex(&[10, 0, 0, 1]), "0a 00 00 01");
        for s in ["0a 00 00 01", "0a000001", "0x0a000001", "0a:00:00:01", " 0a_00_00_01 "] {
            assert_eq!(unhex(s), Some(vec![10, 0, 0, 1]), "{s}");
        }
        for bad in ["", "0", "zz", "0a 0"] {
            assert_eq!(unhex(bad), None, "{bad}");
        }
    }
}
