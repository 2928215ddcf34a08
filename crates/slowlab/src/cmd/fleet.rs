//! `slowlab fleet`: SQL over the Parquet tables of `slowlab export`, run
//! by DuckDB (`slowlab_fleet::query`) in the `slowlab-fleet-query` binary
//! beside this one, and the named queries
//! (`top-findings`, `regressions`). Prints a table or JSON rows. Without
//! the `duckdb` feature it says in one line how to get it. Glue only.

use std::path::PathBuf;

use clap::{Args, Subcommand};

/// Query exports of many hosts (`slowlab export`) with SQL.
///
/// Every table of DIR is a view: runs, samples, stacks, frames, findings,
/// processes, waits, each with the partition columns host and run (text);
/// only runs written whole are shown. Schemas: docs/fleet.md.
///
/// Examples:
///
///   slowlab fleet top-findings /srv/fleet
///   slowlab fleet regressions /srv/fleet --before release-41 --after release-42
///   slowlab fleet query /srv/fleet "SELECT host, SUM(weight) FROM samples WHERE kind = 'cpu' GROUP BY host"
///   slowlab fleet query /srv/fleet "SELECT host, title FROM findings WHERE id = 'memcg-thrash'" --json
#[derive(Args, Debug)]
#[command(verbatim_doc_comment)]
pub struct FleetArgs {
    #[command(subcommand)]
    command: FleetCommand,
}

#[derive(Subcommand, Debug)]
enum FleetCommand {
    /// Run one SQL statement (DuckDB's dialect) over DIR's tables
    Query {
        /// The export root (`slowlab export --parquet DIR`)
        dir: PathBuf,
        /// The SQL statement
        sql: String,
        /// Print the rows as a JSON array of objects
        #[arg(long)]
        json: bool,
    },
    /// Which findings fired on which hosts, the most costly first
    TopFindings {
        /// The export root
        dir: PathBuf,
        /// Print the rows as a JSON array of objects
        #[arg(long)]
        json: bool,
    },
    /// Which functions' share of CPU grew from one run to another
    Regressions {
        /// The export root
        dir: PathBuf,
        /// The run before (its `run` partition, as given to `export --run`)
        #[arg(long, value_name = "RUN")]
        before: String,
        /// The run after
        #[arg(long, value_name = "RUN")]
        after: String,
        /// Print the rows as a JSON array of objects
        #[arg(long)]
        json: bool,
    },
}

pub fn run(args: FleetArgs) -> anyhow::Result<i32> {
    #[cfg(not(feature = "duckdb"))]
    {
        let _ = args;
        anyhow::bail!(
            "this slowlab was built without DuckDB: run `scripts/setup.sh --fleet` (installs libduckdb.so) and build with `cargo build --release --features duckdb`, or query the directory with Spark SQL as the README shows"
        )
    }
    #[cfg(feature = "duckdb")]
    {
        let (dir, sql, json) = match args.command {
            FleetCommand::Query { dir, sql, json } => (dir, sql, json),
            FleetCommand::TopFindings { dir, json } => {
                (dir, slowlab_fleet::named::TOP_FINDINGS.to_owned(), json)
            }
            FleetCommand::Regressions {
                dir,
                before,
                after,
                json,
            } => (
                dir,
                slowlab_fleet::named::regressions(&before, &after),
                json,
            ),
        };
        query(&dir, &sql, json)
    }
}

/// Runs the query in `slowlab-fleet-query`, beside this binary: only that
/// one loads DuckDB (see its doc). Its rows and its one-line error go
/// straight to this process's output; its exit code is this one's.
#[cfg(feature = "duckdb")]
fn query(dir: &std::path::Path, sql: &str, json: bool) -> anyhow::Result<i32> {
    let helper = std::env::current_exe()?.with_file_name("slowlab-fleet-query");
    if !helper.is_file() {
        anyhow::bail!(
            "{} is missing (slowlab fleet runs its queries there): build both with `cargo build --release -p slowlab --features duckdb` and keep them in one directory",
            helper.display()
        );
    }
    let mut cmd = std::process::Command::new(&helper);
    cmd.arg(dir).arg(sql);
    if json {
        cmd.arg("--json");
    }
    let status = cmd
        .status()
        .map_err(|e| anyhow::anyhow!("cannot run {}: {e}", helper.display()))?;
    Ok(status.code().unwrap_or(2))
}
