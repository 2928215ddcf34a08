//! `slowlab fleet`'s arguments. Definitions and help only: the binary runs them.

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
    pub command: FleetCommand,
}

#[derive(Subcommand, Debug)]
pub enum FleetCommand {
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
