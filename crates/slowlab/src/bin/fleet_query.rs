//! `slowlab-fleet-query DIR SQL [--json]`: the DuckDB half of `slowlab
//! fleet`, a binary of its own so that only it loads libduckdb.so: linked
//! into `slowlab`, that library cost every command 11 ms of start-up and
//! 9 MB of memory (`slowlab --version`: 13.0 ms against 1.5 ms). `slowlab
//! fleet` runs it from its own directory, with its arguments checked; it
//! prints the rows as `slowlab fleet` documents, or one error line.

#[path = "../one_line.rs"]
mod one_line;

use std::io::Write;
use std::path::PathBuf;

fn main() {
    let mut args: Vec<String> = std::env::args().skip(1).collect();
    let json = args.iter().any(|a| a == "--json");
    args.retain(|a| a != "--json");
    let code = match &args[..] {
        [dir, sql] => match query(&PathBuf::from(dir), sql, json) {
            Ok(()) => 0,
            Err(err) => {
                eprintln!("slowlab: error: {}", one_line::one_line(&err));
                2
            }
        },
        _ => {
            eprintln!("slowlab: error: usage: slowlab-fleet-query DIR SQL [--json] (run `slowlab fleet query` instead)");
            2
        }
    };
    std::process::exit(code);
}

fn query(dir: &std::path::Path, sql: &str, json: bool) -> anyhow::Result<()> {
    let fleet = slowlab_fleet::query::Fleet::open(dir)?;
    let answer = fleet.query(sql)?;
    let mut out = std::io::BufWriter::new(std::io::stdout().lock());
    if json {
        serde_json::to_writer_pretty(&mut out, &answer.json_rows()?)?;
        writeln!(out)?;
    } else {
        write!(out, "{}", answer.table_text()?)?;
    }
    out.flush()?;
    Ok(())
}
