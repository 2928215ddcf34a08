//! `slowlab fleet`: SQL over the Parquet tables of `slowlab export`, run
//! by DuckDB (`slowlab_fleet::query`) in the `slowlab-fleet-query` binary
//! beside this one, and the named queries
//! (`top-findings`, `regressions`). Prints a table or JSON rows. Without
//! the `duckdb` feature it says in one line how to get it. Glue only.

use slowlab_cli::fleet::FleetArgs;

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
        use slowlab_cli::fleet::FleetCommand;
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
