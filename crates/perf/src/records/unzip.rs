//! PERF_RECORD_COMPRESSED(2): the bodies of compressed records, one zstd
//! stream across all of them, decompressed into a buffer of the reader's
//! own, within a bound a hostile file cannot talk past.
//!
//! It does not index what comes out (`walk` does).

use super::Endian;

/// The most a compressed record may grow when decompressed, as a multiple
/// of the compressed bytes (plus one chunk): perf's zstd at its default
/// level shrinks records about 3 to 10 times, while a hostile file could
/// claim gigabytes in a few kilobytes of zstd.
pub(crate) const MAX_UNZIP_RATIO: usize = 256;

/// Bytes decompressed per step.
const UNZIP_CHUNK: usize = 1 << 20;

/// Decompresses the bodies of PERF_RECORD_COMPRESSED(2) records, one zstd
/// stream across all of them.
#[derive(Default)]
pub(super) struct Unzip {
    out: Vec<u8>,
    /// Compressed bytes fed so far.
    fed: usize,
    chunk: Vec<u8>,
    error: Option<String>,
    dctx: Option<zstd_safe::DCtx<'static>>,
    big: bool,
}

impl Unzip {
    /// Nothing fed yet, for a file of that byte order.
    pub(super) fn new(big: bool) -> Unzip {
        Unzip {
            big,
            ..Unzip::default()
        }
    }

    /// Whether a compressed record was fed (whole or not).
    pub(super) fn fed_any(&self) -> bool {
        self.fed > 0 || self.error.is_some()
    }

    pub(super) fn feed(&mut self, body: &[u8], v2: bool) {
        if self.error.is_some() {
            return;
        }
        let data = if v2 {
            // COMPRESSED2: u64 data size, then the data and padding.
            let e = Endian { big: self.big };
            match e
                .u64(body, 0)
                .and_then(|n| body.get(8..8usize.checked_add(usize::try_from(n).ok()?)?))
            {
                Some(d) => d,
                None => {
                    self.error = Some("a compressed record is corrupt".into());
                    return;
                }
            }
        } else {
            body
        };
        self.fed = self.fed.saturating_add(data.len());
        let most = self
            .fed
            .saturating_mul(MAX_UNZIP_RATIO)
            .saturating_add(UNZIP_CHUNK);
        let dctx = self.dctx.get_or_insert_with(zstd_safe::DCtx::create);
        let mut input = zstd_safe::InBuffer::around(data);
        if self.chunk.is_empty() {
            self.chunk = vec![0u8; UNZIP_CHUNK];
        }
        let chunk = &mut self.chunk;
        loop {
            let mut output = zstd_safe::OutBuffer::around(&mut chunk[..]);
            match dctx.decompress_stream(&mut output, &mut input) {
                Ok(_) => {
                    let n = output.pos();
                    if self.out.len() + n > most {
                        self.error = Some(format!(
                            "compressed records decompress to more than {MAX_UNZIP_RATIO} times their size (a damaged file)"
                        ));
                        return;
                    }
                    self.out.extend_from_slice(&chunk[..n]);
                    if n < chunk.len() && input.pos() == data.len() {
                        break;
                    }
                }
                Err(code) => {
                    self.error = Some(format!(
                        "a compressed record could not be decompressed ({})",
                        zstd_safe::get_error_name(code)
                    ));
                    return;
                }
            }
        }
    }

    pub(super) fn finish(self) -> (Vec<u8>, Option<String>) {
        (self.out, self.error)
    }
}
