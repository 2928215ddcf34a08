"""Reads a `slowlab export` directory with PySpark in local mode and
compares Spark SQL's answers to DuckDB's (`slowlab fleet ... --json`).

Usage: spark_check.py DIR BEFORE AFTER DUCK_TOTALS.json DUCK_TOP.json DUCK_REGRESSIONS.json
Prints one line per query compared and exits 0 when every answer matches,
1 (with the differing rows) when one does not. The Spark SQL here is the
README's."""

import json
import sys

from pyspark.sql import SparkSession

TABLES = ["runs", "samples", "stacks", "frames", "findings", "processes", "waits"]

TOTALS = """
SELECT host, SUM(weight) AS w FROM samples WHERE kind = 'cpu' GROUP BY host ORDER BY host"""

TOP_FINDINGS = """
SELECT id,
       COUNT(DISTINCT host) AS hosts,
       array_join(array_sort(collect_set(host)), ',') AS host_list,
       COUNT(*) AS findings,
       ROUND(SUM(cost_s), 3) AS total_cost_s,
       CASE MAX(severity_rank) WHEN 3 THEN 'high' WHEN 2 THEN 'medium' ELSE 'low' END AS severity
FROM findings
GROUP BY id
ORDER BY total_cost_s DESC, id"""

REGRESSIONS = """
WITH frame AS (SELECT DISTINCT frame_id, module, function FROM frames),
     stack AS (SELECT DISTINCT stack_id, frame_id FROM stacks),
     cpu AS (SELECT run, stack_id, SUM(weight) AS weight FROM samples
             WHERE kind = 'cpu' AND run IN ('{b}', '{a}') GROUP BY run, stack_id),
     total AS (SELECT run, SUM(weight) AS weight FROM cpu GROUP BY run),
     share AS (SELECT c.run, f.module, f.function, SUM(c.weight) / MAX(t.weight) AS share
               FROM cpu c JOIN stack k ON c.stack_id = k.stack_id
               JOIN frame f ON k.frame_id = f.frame_id
               JOIN total t ON c.run = t.run
               GROUP BY c.run, f.module, f.function)
SELECT module, function,
       ROUND(100 * COALESCE(MAX(CASE WHEN run = '{b}' THEN share END), 0), 2) AS before_pct,
       ROUND(100 * COALESCE(MAX(CASE WHEN run = '{a}' THEN share END), 0), 2) AS after_pct,
       ROUND(100 * (COALESCE(MAX(CASE WHEN run = '{a}' THEN share END), 0)
                  - COALESCE(MAX(CASE WHEN run = '{b}' THEN share END), 0)), 2) AS change_pct
FROM share
GROUP BY module, function
ORDER BY change_pct DESC, module, function
LIMIT 20"""


def register(spark, root):
    for t in TABLES:
        path = f"{root}/{t}"
        df = spark.read.option("basePath", path).parquet(path)
        if t == "runs":
            df.createOrReplaceTempView("runs")
        else:
            df.createOrReplaceTempView(f"{t}_all")
            # Only runs written whole (their `runs` partition is in place).
            spark.sql(
                f"CREATE OR REPLACE TEMP VIEW {t} AS SELECT * FROM {t}_all "
                "WHERE concat(host, '/', run) IN (SELECT concat(host, '/', run) FROM runs)"
            )


def same(a, b):
    if isinstance(a, float) or isinstance(b, float):
        return a is not None and b is not None and abs(float(a) - float(b)) <= 0.011
    return a == b


def compare(name, spark_rows, duck_rows):
    problems = []
    if len(spark_rows) != len(duck_rows):
        problems.append(f"{len(spark_rows)} rows from Spark, {len(duck_rows)} from DuckDB")
    for i, (s, d) in enumerate(zip(spark_rows, duck_rows)):
        for key, value in s.items():
            if not same(value, d.get(key)):
                problems.append(f"row {i} {key}: Spark {value!r}, DuckDB {d.get(key)!r}")
    if problems:
        print(f"{name}: DIFFERENT: " + "; ".join(problems[:10]))
        return False
    print(f"{name}: same {len(spark_rows)} rows")
    return True


def main():
    root, before, after, totals_f, top_f, regr_f = sys.argv[1:7]
    spark = (
        SparkSession.builder.master("local[1]")
        .appName("slowlab-fleet-check")
        .config("spark.sql.sources.partitionColumnTypeInference.enabled", "false")
        .config("spark.ui.enabled", "false")
        .config("spark.sql.shuffle.partitions", "2")
        .getOrCreate()
    )
    spark.sparkContext.setLogLevel("ERROR")
    register(spark, root)
    ok = True
    for name, sql, duck_file in [
        ("per-host CPU samples", TOTALS, totals_f),
        ("top-findings", TOP_FINDINGS, top_f),
        ("regressions", REGRESSIONS.format(b=before, a=after), regr_f),
    ]:
        rows = [r.asDict() for r in spark.sql(sql).collect()]
        with open(duck_file) as f:
            duck = json.load(f)
        ok = compare(name, rows, duck) and ok
    spark.stop()
    sys.exit(0 if ok else 1)


if __name__ == "__main__":
    main()
