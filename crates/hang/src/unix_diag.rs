//! The peers of Unix sockets from the kernel's `sock_diag` netlink
//! interface (`NETLINK_SOCK_DIAG`, `unix_diag`): one dump of every Unix
//! socket of slowlab's network namespace with `UDIAG_SHOW_PEER`, kept as
//! inode → peer inode.
//!
//! It does not see sockets of another network namespace (the dump is per
//! namespace), and it does not find which process holds a socket (the fd
//! index does). The reply's parsing is a pure function, tested on bytes.

use std::collections::HashMap;
use std::io;

/// `SOCK_DIAG_BY_FAMILY` (linux/sock_diag.h).
const SOCK_DIAG_BY_FAMILY: u16 = 20;
/// `UDIAG_SHOW_PEER` (linux/unix_diag.h).
const UDIAG_SHOW_PEER: u32 = 0x4;
/// `UNIX_DIAG_PEER`: the attribute holding the peer's inode (a u32).
const UNIX_DIAG_PEER: u16 = 2;
/// `sizeof(struct nlmsghdr)`.
const NLMSG_HDRLEN: usize = 16;
/// `sizeof(struct unix_diag_msg)`: family, type, state, pad (u8 each),
/// ino (u32), cookie (2 × u32).
const UNIX_DIAG_MSG_LEN: usize = 16;

/// Every Unix socket's peer inode, by inode (sockets without a peer are
/// absent).
pub fn unix_peers() -> io::Result<HashMap<u64, u64>> {
    // SAFETY: plain socket(2); the descriptor is closed by `Fd`'s drop.
    let fd = unsafe {
        libc::socket(
            libc::AF_NETLINK,
            libc::SOCK_DGRAM | libc::SOCK_CLOEXEC,
            libc::NETLINK_SOCK_DIAG,
        )
    };
    if fd < 0 {
        return Err(io::Error::last_os_error());
    }
    let fd = Fd(fd);
    let request = dump_request();
    // SAFETY: the buffer is valid for its length; the kernel is the
    // default destination of a netlink send.
    let sent = unsafe { libc::send(fd.0, request.as_ptr().cast(), request.len(), 0) };
    if sent < 0 {
        return Err(io::Error::last_os_error());
    }
    let mut peers = HashMap::new();
    let mut buf = vec![0u8; 32 * 1024];
    loop {
        // SAFETY: the buffer is valid for its length.
        let n = unsafe { libc::recv(fd.0, buf.as_mut_ptr().cast(), buf.len(), 0) };
        if n < 0 {
            return Err(io::Error::last_os_error());
        }
        match parse_reply(&buf[..n as usize], &mut peers)? {
            Reply::More => continue,
            Reply::Done => return Ok(peers),
        }
    }
}

struct Fd(libc::c_int);

impl Drop for Fd {
    fn drop(&mut self) {
        // SAFETY: closes the descriptor this owns, once.
        unsafe { libc::close(self.0) };
    }
}

/// An `nlmsghdr` and a `unix_diag_req` asking for every Unix socket in
/// every state, with its peer.
fn dump_request() -> Vec<u8> {
    let mut msg = Vec::with_capacity(NLMSG_HDRLEN + 24);
    let len = (NLMSG_HDRLEN + 24) as u32;
    msg.extend_from_slice(&len.to_ne_bytes());
    msg.extend_from_slice(&SOCK_DIAG_BY_FAMILY.to_ne_bytes());
    let flags = (libc::NLM_F_REQUEST | libc::NLM_F_DUMP) as u16;
    msg.extend_from_slice(&flags.to_ne_bytes());
    msg.extend_from_slice(&1u32.to_ne_bytes()); // seq
    msg.extend_from_slice(&0u32.to_ne_bytes()); // port id: the kernel
    msg.push(libc::AF_UNIX as u8); // sdiag_family
    msg.push(0); // sdiag_protocol
    msg.extend_from_slice(&0u16.to_ne_bytes()); // pad
    msg.extend_from_slice(&u32::MAX.to_ne_bytes()); // udiag_states: all
    msg.extend_from_slice(&0u32.to_ne_bytes()); // udiag_ino
    msg.extend_from_slice(&UDIAG_SHOW_PEER.to_ne_bytes());
    msg.extend_from_slice(&u32::MAX.to_ne_bytes()); // cookie: none
    msg.extend_from_slice(&u32::MAX.to_ne_bytes());
    msg
}

#[derive(Debug, PartialEq)]
enum Reply {
    More,
    Done,
}

fn u16_at(b: &[u8], at: usize) -> Option<u16> {
    Some(u16::from_ne_bytes(b.get(at..at + 2)?.try_into().ok()?))
}

fn u32_at(b: &[u8], at: usize) -> Option<u32> {
    Some(u32::from_ne_bytes(b.get(at..at + 4)?.try_into().ok()?))
}

/// Reads one datagram of netlink messages into `peers`.
fn parse_reply(mut data: &[u8], peers: &mut HashMap<u64, u64>) -> io::Result<Reply> {
    while data.len() >= NLMSG_HDRLEN {
        let bad = || io::Error::new(io::ErrorKind::InvalidData, "malformed sock_diag reply");
        let len = u32_at(data, 0).ok_or_else(bad)? as usize;
        let kind = u16_at(data, 4).ok_or_else(bad)?;
        if len < NLMSG_HDRLEN || len > data.len() {
            return Err(bad());
        }
        let msg = &data[NLMSG_HDRLEN..len];
        match kind as i32 {
            libc::NLMSG_DONE => return Ok(Reply::Done),
            libc::NLMSG_ERROR => {
                let errno = u32_at(msg, 0).map_or(0, |e| -(e as i32));
                if errno == 0 {
                    return Ok(Reply::Done);
                }
                return Err(io::Error::from_raw_os_error(errno));
            }
            _ if kind == SOCK_DIAG_BY_FAMILY => {
                if let Some(ino) = u32_at(msg, 4) {
                    let mut attrs = msg.get(UNIX_DIAG_MSG_LEN..).unwrap_or(&[]);
                    while attrs.len() >= 4 {
                        let alen = u16_at(attrs, 0).unwrap_or(0) as usize;
                        let atype = u16_at(attrs, 2).unwrap_or(0);
                        if alen < 4 || alen > attrs.len() {
                            break;
                        }
                        if atype == UNIX_DIAG_PEER {
                            if let Some(peer) = u32_at(attrs, 4).filter(|&p| p != 0) {
                                peers.insert(ino as u64, peer as u64);
                            }
                        }
                        attrs = &attrs[((alen + 3) & !3).min(attrs.len())..];
                    }
                }
            }
            _ => {}
        }
        data = &data[((len + 3) & !3).min(data.len())..];
    }
    Ok(Reply::More)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn message(ino: u32, peer: Option<u32>) -> Vec<u8> {
        let mut body = vec![libc::AF_UNIX as u8, 1, 1, 0];
        body.extend_from_slice(&ino.to_ne_bytes());
        body.extend_from_slice(&[0; 8]);
        if let Some(p) = peer {
            body.extend_from_slice(&8u16.to_ne_bytes());
            body.extend_from_slice(&UNIX_DIAG_PEER.to_ne_bytes());
            body.extend_from_slice(&p.to_ne_bytes());
        }
        let mut msg = ((NLMSG_HDRLEN + body.len()) as u32).to_ne_bytes().to_vec();
        msg.extend_from_slice(&SOCK_DIAG_BY_FAMILY.to_ne_bytes());
        msg.extend_from_slice(&[0; 10]);
        msg.extend_from_slice(&body);
        msg
    }

    #[test]
    fn peers_are_read_and_sockets_without_one_skipped() {
        let mut data = message(100, Some(101));
        data.extend(message(102, None));
        let mut peers = HashMap::new();
        assert_eq!(parse_reply(&data, &mut peers).unwrap(), Reply::More);
        assert_eq!(peers, HashMap::from([(100, 101)]));
    }

    #[test]
    fn done_ends_and_a_truncated_reply_is_an_error() {
        let mut done = (NLMSG_HDRLEN as u32 + 4).to_ne_bytes().to_vec();
        done.extend_from_slice(&(libc::NLMSG_DONE as u16).to_ne_bytes());
        done.extend_from_slice(&[0; 14]);
        assert_eq!(
            parse_reply(&done, &mut HashMap::new()).unwrap(),
            Reply::Done
        );
        let mut bad = message(1, Some(2));
        bad.truncate(20);
        assert!(parse_reply(&bad, &mut HashMap::new()).is_err());
    }

    #[test]
    fn the_live_dump_answers() {
        // Any Linux machine has some Unix sockets; a pair made here has peers.
        let (a, _b) = std::os::unix::net::UnixStream::pair().unwrap();
        use std::os::unix::fs::MetadataExt;
        let ino = std::fs::metadata(format!(
            "/proc/self/fd/{}",
            std::os::fd::AsRawFd::as_raw_fd(&a)
        ))
        .unwrap()
        .ino();
        match unix_peers() {
            Ok(peers) => assert!(peers.contains_key(&ino), "no peer for socket {ino}"),
            Err(e) => slowlab_testkit::skip(format!("sock_diag unavailable: {e}")),
        }
    }
}
