//! Names of TraceLogging (self-describing) events, from the extended data
//! items ETW stores with them: the provider traits item (type 12: a 16-bit
//! size then the provider's NUL-terminated UTF-8 name) and the event schema
//! item (type 11: a 16-bit size, tag bytes while their high bit is set,
//! then the event's NUL-terminated UTF-8 name, then the field metadata).
//! Field values are not decoded.

use crate::header::ext_items;

const EXT_TYPE_EVENT_SCHEMA_TL: u16 = 11;
const EXT_TYPE_PROV_TRAITS: u16 = 12;

fn cstr(b: &[u8]) -> String {
    let end = b.iter().position(|&c| c == 0).unwrap_or(b.len());
    String::from_utf8_lossy(&b[..end]).into_owned()
}

/// `(provider name, event name)` of a TraceLogging event, from its extended
/// data; `None` when it has neither item.
pub fn names(ext: &[u8]) -> Option<(String, String)> {
    let mut provider = None;
    let mut event = None;
    for (kind, data) in ext_items(ext) {
        match kind {
            EXT_TYPE_PROV_TRAITS => provider = data.get(2..).map(cstr),
            EXT_TYPE_EVENT_SCHEMA_TL => {
                // Skip the size and the tag bytes (high bit: another follows).
                let mut at = 2;
                while data.get(at).is_some_and(|b| b & 0x80 != 0) {
                    at += 1;
                }
                event = data.get(at + 1..).map(cstr);
            }
            _ => {}
        }
    }
    if provider.is_none() && event.is_none() {
        return None;
    }
    Some((provider.unwrap_or_default(), event.unwrap_or_default()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_provider_and_event_names() {
        // The two items of PerfView's SelfDescribingSingleEvent.etl.
        let ext: &[u8] = b"\x18\x00\x0c\x00\x01\x00\x0b\x00\x0b\x00MySource\x00\x00\x00\x00\x00\x00\
            \x20\x00\x0b\x00\x00\x00\x17\x00\x17\x00\x00TestEvent\x00a\x00\x98\x02b\x00\x01c\x00\x01\x00";
        assert_eq!(
            names(ext),
            Some(("MySource".to_string(), "TestEvent".to_string()))
        );
        assert_eq!(names(&ext[..5]), None);
    }
}
