//! The other end of a loopback TCP connection, from `/proc/PID/net/tcp`
//! and `tcp6` (the waiting process's network namespace): the socket's line
//! gives its local and remote address, and the line with those two swapped
//! is the peer, whose inode the fd index turns into a process.
//!
//! Only connections to a loopback address (127.0.0.0/8, ::1, or an
//! IPv4-mapped 127.x) or to the socket's own address are followed: a
//! remote host's process is out of reach. Parsing is pure, tested on text.

/// A line of `/proc/net/tcp{,6}`: addresses as the kernel prints them
/// (`0100007F:1F90`), compared as text.
#[derive(Clone, Debug, PartialEq)]
pub struct TcpSocket {
    pub local: String,
    pub remote: String,
    pub inode: u64,
}

pub fn parse_tcp(text: &str) -> Vec<TcpSocket> {
    text.lines()
        .skip(1)
        .filter_map(|line| {
            let f: Vec<&str> = line.split_whitespace().collect();
            Some(TcpSocket {
                local: f.get(1)?.to_string(),
                remote: f.get(2)?.to_string(),
                inode: f.get(9)?.parse().ok()?,
            })
        })
        .collect()
}

/// Is this `ADDR:PORT` (hex, as printed) a loopback address?
pub fn is_loopback(addr: &str) -> bool {
    let Some((ip, _)) = addr.split_once(':') else {
        return false;
    };
    match ip.len() {
        // IPv4, printed as a little-endian u32: 127.x.y.z ends in 7F.
        8 => ip.ends_with("7F"),
        // IPv6 as four little-endian u32 words: ::1, or ::ffff:127.x.y.z.
        32 => {
            ip == "00000000000000000000000001000000"
                || (ip.starts_with("0000000000000000FFFF0000") && ip.ends_with("7F"))
        }
        _ => false,
    }
}

/// The inode of the other end of socket `inode`, when it is a loopback
/// connection whose other end is in `sockets` too.
pub fn loopback_peer(sockets: &[TcpSocket], inode: u64) -> Option<u64> {
    let own = sockets.iter().find(|s| s.inode == inode)?;
    let ip = |a: &str| a.split_once(':').map(|(ip, _)| ip.to_string());
    if !is_loopback(&own.remote) && ip(&own.remote) != ip(&own.local) {
        return None;
    }
    sockets
        .iter()
        .find(|s| s.local == own.remote && s.remote == own.local && s.inode != 0)
        .map(|s| s.inode)
}

#[cfg(test)]
mod tests {
    use super::*;

    const TCP: &str = "  sl  local_address rem_address   st tx_queue rx_queue tr tm->when retrnsmt   uid  timeout inode
   0: 0100007F:1F90 00000000:0000 0A 00000000:00000000 00:00000000 00000000     0        0 100 1 0 100 0 0 10 0
   1: 0100007F:1F90 0100007F:A1B2 01 00000000:00000000 00:00000000 00000000     0        0 101 1 0 20 4 30 10 -1
   2: 0100007F:A1B2 0100007F:1F90 01 00000000:00000000 00:00000000 00000000     0        0 102 1 0 20 4 30 10 -1
   3: 0A00020F:C350 5DB8D822:01BB 01 00000000:00000000 00:00000000 00000000     0        0 103 1 0 20 4 30 10 -1
";

    #[test]
    fn a_loopback_connection_finds_its_other_end() {
        let sockets = parse_tcp(TCP);
        assert_eq!(sockets.len(), 4);
        assert_eq!(loopback_peer(&sockets, 102), Some(101));
        assert_eq!(loopback_peer(&sockets, 101), Some(102));
        assert_eq!(loopback_peer(&sockets, 100), None, "a listener has no peer");
        assert_eq!(loopback_peer(&sockets, 103), None, "a remote host");
    }

    #[test]
    fn loopback_addresses_in_both_families() {
        assert!(is_loopback("0100007F:1F90"));
        assert!(!is_loopback("0A00020F:1F90"));
        assert!(is_loopback("00000000000000000000000001000000:1F90"));
        assert!(is_loopback("0000000000000000FFFF00000100007F:1F90"));
        assert!(!is_loopback("garbage"));
    }
}
