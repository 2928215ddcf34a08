//! Prints an ETL file's header, event counts (TraceEvent's names) and
//! warnings: `cargo run -p slowlab-etl --example etl_counts FILE.etl[.zip]`.

fn main() {
    let Some(path) = std::env::args().nth(1) else {
        eprintln!("usage: etl_counts FILE.etl[.zip]");
        std::process::exit(2);
    };
    match slowlab_etl::read_file(std::path::Path::new(&path)) {
        Ok(etl) => {
            println!("{:?}", etl.header);
            for (name, n) in etl.event_counts() {
                println!("COUNT {name}:{n}");
            }
            for w in etl.warnings() {
                println!("warning: {w}");
            }
        }
        Err(e) => {
            eprintln!("error: {e}");
            std::process::exit(1);
        }
    }
}
