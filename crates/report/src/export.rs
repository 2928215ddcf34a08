//! The export files of `slowlab analyze` and the flame graphs of the
//! reports: folded stacks as text, flame graph SVGs drawn by inferno, and
//! gzipped pprof profiles — as bytes, which the caller writes with
//! [`crate::write_atomically`] so that no half-written export looks
//! complete. The data (folded-stack lines, the encoded profile) comes from
//! `slowlab_analyze::export`; nothing is computed from a trace here.

use std::io::Write;

use crate::html::escape;
use crate::ReportError;

/// Folded-stack lines as a file's text, one line each.
pub fn collapsed_text(lines: &[String]) -> String {
    let mut out = String::with_capacity(lines.iter().map(|l| l.len() + 1).sum());
    for l in lines {
        out.push_str(l);
        out.push('\n');
    }
    out
}

/// A flame graph SVG of sampled-CPU folded stacks.
pub fn cpu_flamegraph_svg(lines: &[String], title: &str) -> Result<Vec<u8>, ReportError> {
    flamegraph_svg(lines, title, "samples")
}

/// A flame graph SVG of folded-stack lines whose counts are in
/// `count_name` units (samples, µs blocked, …).
pub fn flamegraph_svg(
    lines: &[String],
    title: &str,
    count_name: &str,
) -> Result<Vec<u8>, ReportError> {
    let mut out = Vec::new();
    if lines.is_empty() {
        // inferno refuses empty input; draw an empty graph ourselves.
        let _ = write!(
            out,
            r#"<svg xmlns="http://www.w3.org/2000/svg" width="600" height="60"><text x="10" y="30">{}: nothing selected</text></svg>"#,
            escape(title)
        );
        return Ok(out);
    }
    let mut opts = inferno::flamegraph::Options::default();
    opts.title = title.to_owned();
    opts.count_name = count_name.to_owned();
    opts.colors =
        inferno::flamegraph::color::Palette::Multi(inferno::flamegraph::color::MultiPalette::Perl);
    inferno::flamegraph::from_lines(&mut opts, lines.iter().map(String::as_str), &mut out)
        .map_err(|e| ReportError::FlameGraph(e.to_string()))?;
    Ok(out)
}

/// A pprof profile (`profile.proto` bytes) gzipped, as `.pb.gz` files are.
pub fn pprof_gz(bytes: &[u8]) -> Result<Vec<u8>, ReportError> {
    let mut gz = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::default());
    let compress = |e: std::io::Error| ReportError::Serialize {
        what: "the pprof profile".into(),
        message: e.to_string(),
    };
    gz.write_all(bytes).map_err(compress)?;
    gz.finish().map_err(compress)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn lines() -> Vec<String> {
        vec![
            "app;main;work;memset_[k] 3".into(),
            "app;main;work 2".into(),
        ]
    }

    #[test]
    fn flamegraph_is_svg_with_the_frames() {
        let svg = String::from_utf8(flamegraph_svg(&lines(), "test", "samples").unwrap()).unwrap();
        assert!(svg.contains("<svg") && svg.contains("memset"), "{svg}");
    }

    #[test]
    fn an_empty_selection_draws_an_empty_graph_with_an_escaped_title() {
        let svg = String::from_utf8(flamegraph_svg(&[], "<x>", "samples").unwrap()).unwrap();
        assert!(svg.contains("&lt;x&gt;: nothing selected"), "{svg}");
    }

    #[test]
    fn pprof_is_gzip_of_the_bytes() {
        let out = pprof_gz(b"profile").unwrap();
        assert_eq!(&out[..2], &[0x1f, 0x8b]);
        let mut back = Vec::new();
        std::io::Read::read_to_end(&mut flate2::read::GzDecoder::new(&out[..]), &mut back).unwrap();
        assert_eq!(back, b"profile");
    }

    #[test]
    fn collapsed_text_is_one_line_each() {
        assert_eq!(
            collapsed_text(&lines()),
            "app;main;work;memset_[k] 3\napp;main;work 2\n"
        );
    }
}
