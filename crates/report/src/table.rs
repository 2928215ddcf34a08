//! Plain aligned text tables for the terminal: a header row, then rows, each
//! column padded to its widest cell; numbers right-aligned.
//!
//! Written by hand on purpose: it is a few lines, and the table crates draw
//! borders and box characters that make output harder to copy into a note.

/// Horizontal alignment of a column.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Align {
    Left,
    Right,
}

/// A table under construction.
#[derive(Debug, Clone, Default)]
pub struct Table {
    headers: Vec<String>,
    aligns: Vec<Align>,
    rows: Vec<Vec<String>>,
}

impl Table {
    /// Columns as (header, alignment).
    pub fn new(columns: &[(&str, Align)]) -> Self {
        Table {
            headers: columns.iter().map(|(h, _)| h.to_string()).collect(),
            aligns: columns.iter().map(|(_, a)| *a).collect(),
            rows: Vec::new(),
        }
    }

    pub fn row(&mut self, cells: Vec<String>) {
        self.rows.push(cells);
    }

    pub fn is_empty(&self) -> bool {
        self.rows.is_empty()
    }

    /// The table as lines joined by newlines, with `indent` spaces before
    /// each line and two spaces between columns. No trailing spaces.
    pub fn render(&self, indent: usize) -> String {
        let columns = self.headers.len();
        let mut widths: Vec<usize> = self.headers.iter().map(|h| h.chars().count()).collect();
        for row in &self.rows {
            for (i, cell) in row.iter().enumerate().take(columns) {
                widths[i] = widths[i].max(cell.chars().count());
            }
        }
        let pad = " ".repeat(indent);
        let mut out = String::new();
        for row in std::iter::once(&self.headers).chain(&self.rows) {
            let mut line = pad.clone();
            for (i, (&width, &align)) in widths.iter().zip(&self.aligns).enumerate() {
                let cell = row.get(i).map(String::as_str).unwrap_or("");
                let fill = width.saturating_sub(cell.chars().count());
                if i > 0 {
                    line.push_str("  ");
                }
                match align {
                    Align::Left => {
                        line.push_str(cell);
                        line.push_str(&" ".repeat(fill));
                    }
                    Align::Right => {
                        line.push_str(&" ".repeat(fill));
                        line.push_str(cell);
                    }
                }
            }
            out.push_str(line.trim_end());
            out.push('\n');
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn columns_align_and_lines_have_no_trailing_space() {
        let mut t = Table::new(&[("name", Align::Left), ("n", Align::Right)]);
        t.row(vec!["a".into(), "1000".into()]);
        t.row(vec!["longer".into(), "2".into()]);
        assert_eq!(
            t.render(2),
            "  name       n\n  a       1000\n  longer     2\n"
        );
    }
}
