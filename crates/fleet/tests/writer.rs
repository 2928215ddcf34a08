//! The writer on synthetic traces: the Hive layout, the rows of each
//! table read back with the parquet crate, content ids equal across hosts,
//! atomic runs (no staging left, a run exported twice refused, leftovers of
//! a killed export replaced) and partition names checked.

mod synth;

use std::fs::File;
use std::path::Path;

use arrow_array::{Int64Array, RecordBatch, StringArray};
use parquet::arrow::arrow_reader::ParquetRecordBatchReaderBuilder;
use slowlab_analyze::states::ThreadStates;
use slowlab_fleet::{FleetError, Partition, RunExport, Table};

fn read(root: &Path, table: Table, host: &str, run: &str) -> RecordBatch {
    let file = root
        .join(table.name())
        .join(format!("host={host}"))
        .join(format!("run={run}"))
        .join("part-0.parquet");
    let reader = ParquetRecordBatchReaderBuilder::try_new(File::open(&file).unwrap())
        .unwrap()
        .build()
        .unwrap();
    let batches: Vec<RecordBatch> = reader.map(|b| b.unwrap()).collect();
    arrow_select_concat(&batches, table)
}

fn arrow_select_concat(batches: &[RecordBatch], table: Table) -> RecordBatch {
    if batches.is_empty() {
        return RecordBatch::new_empty(table.schema());
    }
    assert_eq!(batches.len(), 1, "small tables are one batch");
    batches[0].clone()
}

fn col<'a, T: 'static>(b: &'a RecordBatch, name: &str) -> &'a T {
    b.column_by_name(name)
        .unwrap_or_else(|| panic!("no column {name}"))
        .as_any()
        .downcast_ref::<T>()
        .unwrap()
}

fn export(
    root: &Path,
    host: &str,
    run: &str,
    stacks: &[(&[&str], usize)],
) -> slowlab_fleet::WrittenRun {
    let trace = synth::trace(host, stacks);
    let mut run_export = RunExport::new(1_795_465_541_000_000);
    let findings = [synth::finding("memcg-thrash", "app", 1.5)];
    run_export
        .add_trace("t.data", &trace, &ThreadStates::build(&trace), &findings)
        .unwrap();
    run_export
        .write(root, &Partition::new(host, run).unwrap())
        .unwrap()
}

#[test]
fn two_hosts_write_every_table_with_ids_that_join() {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path();
    let a = export(
        root,
        "alpha",
        "r1",
        &[(&["main", "work", "hot"], 30), (&["main", "idle"], 5)],
    );
    let b = export(root, "beta", "r1", &[(&["main", "work", "hot"], 12)]);
    assert_eq!(a.rows(Table::Runs), 1);
    assert!(a.bytes() > 0);
    assert!(
        !root.join("_staging").exists(),
        "the staging directory stays behind"
    );
    for t in Table::ALL {
        assert!(
            root.join(t.name())
                .join("host=beta/run=r1/part-0.parquet")
                .is_file(),
            "{}",
            t.name()
        );
    }
    // CPU weight per host = samples of the trace.
    for (host, want) in [("alpha", 35), ("beta", 12)] {
        let s = read(root, Table::Samples, host, "r1");
        let kinds = col::<StringArray>(&s, "kind");
        let weights = col::<Int64Array>(&s, "weight");
        let cpu: i64 = (0..s.num_rows())
            .filter(|&i| kinds.value(i) == "cpu")
            .map(|i| weights.value(i))
            .sum();
        assert_eq!(cpu, want, "{host}");
        let offcpu: i64 = (0..s.num_rows())
            .filter(|&i| kinds.value(i) == "offcpu")
            .map(|i| weights.value(i))
            .sum();
        assert_eq!(offcpu, 5_000_000, "{host}: the 5 ms wait");
        assert!((0..s.num_rows()).any(|i| kinds.value(i) == "fault"));
    }
    // The hot stack has the same id on both hosts, though addresses differ.
    let hot_id = |host: &str| {
        let s = read(root, Table::Samples, host, "r1");
        let kinds = col::<StringArray>(&s, "kind");
        let ids = col::<Int64Array>(&s, "stack_id");
        let weights = col::<Int64Array>(&s, "weight");
        (0..s.num_rows())
            .filter(|&i| kinds.value(i) == "cpu")
            .max_by_key(|&i| weights.value(i))
            .map(|i| ids.value(i))
            .unwrap()
    };
    assert_eq!(hot_id("alpha"), hot_id("beta"));
    let stacks = read(root, Table::Stacks, "beta", "r1");
    assert_eq!(stacks.num_rows(), 3, "main, main;work, main;work;hot");
    let frames = read(root, Table::Frames, "alpha", "r1");
    assert_eq!(frames.num_rows(), 4, "main, work, hot, idle once each");
    let waits = read(root, Table::Waits, "alpha", "r1");
    assert_eq!(waits.num_rows(), 1);
    assert_eq!(col::<StringArray>(&waits, "waker_comm").value(0), "waker");
    assert_eq!(col::<Int64Array>(&waits, "total_ns").value(0), 5_000_000);
    let findings = read(root, Table::Findings, "alpha", "r1");
    assert_eq!(col::<StringArray>(&findings, "id").value(0), "memcg-thrash");
    let evidence: serde_json::Value =
        serde_json::from_str(col::<StringArray>(&findings, "evidence").value(0)).unwrap();
    assert_eq!(evidence["planted"], true);
    let procs = read(root, Table::Processes, "alpha", "r1");
    assert_eq!(procs.num_rows(), 2);
    assert_eq!(b.rows(Table::Findings), 1);
}

#[test]
fn a_run_is_written_once_and_leftovers_are_replaced() {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path();
    export(root, "alpha", "r1", &[(&["main"], 3)]);
    let trace = synth::trace("alpha", &[(&["main"], 3)]);
    let mut again = RunExport::new(0);
    again
        .add_trace("t.data", &trace, &ThreadStates::build(&trace), &[])
        .unwrap();
    let err = again
        .write(root, &Partition::new("alpha", "r1").unwrap())
        .unwrap_err();
    assert!(matches!(err, FleetError::AlreadyExported { .. }), "{err}");
    assert!(err.to_string().contains("--run"), "{err}");

    // A killed export left samples but no runs partition: replaced whole.
    let orphan = root.join("samples/host=alpha/run=r2");
    std::fs::create_dir_all(&orphan).unwrap();
    std::fs::write(orphan.join("part-0.parquet"), b"half a file").unwrap();
    std::fs::write(orphan.join("part-1.parquet"), b"another").unwrap();
    export(root, "alpha", "r2", &[(&["main"], 4)]);
    let names: Vec<_> = std::fs::read_dir(&orphan)
        .unwrap()
        .map(|e| e.unwrap().file_name())
        .collect();
    assert_eq!(names, vec![std::ffi::OsString::from("part-0.parquet")]);
    let s = read(root, Table::Samples, "alpha", "r2");
    assert_eq!(col::<Int64Array>(&s, "weight").value(0), 4);
}

#[test]
fn partition_names_are_checked() {
    for bad in ["", "a/b", "host=x", ".hidden", "_x", "a b", "ü"] {
        let err = Partition::new(bad, "r1").unwrap_err();
        assert!(
            err.to_string().contains("cannot name a partition"),
            "{bad}: {err}"
        );
    }
    assert!(Partition::new("web-01.example", "20261123T202541.123Z").is_ok());
    assert_eq!(slowlab_fleet::host_partition_name("web 01/x"), "web-01-x");
    assert_eq!(slowlab_fleet::host_partition_name("..."), "localhost");
}

#[test]
fn an_unwritable_root_is_an_error_not_a_panic() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("not-a-dir");
    std::fs::write(&file, b"x").unwrap();
    let trace = synth::trace("alpha", &[(&["main"], 1)]);
    let mut e = RunExport::new(0);
    e.add_trace("t.data", &trace, &ThreadStates::build(&trace), &[])
        .unwrap();
    let err = e
        .write(&file, &Partition::new("alpha", "r1").unwrap())
        .unwrap_err();
    assert!(err.to_string().contains("not-a-dir"), "{err}");
}
