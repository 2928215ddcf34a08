//! The named fleet queries (`slowlab fleet top-findings`, `slowlab fleet
//! regressions`) as DuckDB SQL over the table views of `query.rs`. The
//! README gives their Spark SQL twins. Does not run anything.

/// Which detectors fired where: one row per finding id, the hosts that
/// showed it (how many and which), how often, the time it cost in all and
/// its worst severity; the most costly first.
pub const TOP_FINDINGS: &str = "\
SELECT id,
       COUNT(DISTINCT host) AS hosts,
       string_agg(DISTINCT host, ',' ORDER BY host) AS host_list,
       COUNT(*) AS findings,
       ROUND(SUM(cost_s), 3) AS total_cost_s,
       CASE MAX(severity_rank) WHEN 3 THEN 'high' WHEN 2 THEN 'medium' ELSE 'low' END AS severity
FROM findings
GROUP BY id
ORDER BY total_cost_s DESC, id";

/// Which functions' share of CPU samples (self time: the function was
/// the innermost frame) grew from run `before` to run `after`, in
/// percentage points, the 20 that grew most. A run is the `run` partition
/// value, over every host that exported one by that name.
pub fn regressions(before: &str, after: &str) -> String {
    let (b, a) = (quote(before), quote(after));
    format!(
        "\
WITH frame AS (SELECT DISTINCT frame_id, module, function FROM frames),
     stack AS (SELECT DISTINCT stack_id, frame_id FROM stacks),
     cpu AS (SELECT run, stack_id, SUM(weight) AS weight FROM samples
             WHERE kind = 'cpu' AND run IN ({b}, {a}) GROUP BY run, stack_id),
     total AS (SELECT run, SUM(weight) AS weight FROM cpu GROUP BY run),
     share AS (SELECT c.run, f.module, f.function, SUM(c.weight) / MAX(t.weight) AS share
               FROM cpu c JOIN stack k ON c.stack_id = k.stack_id
               JOIN frame f ON k.frame_id = f.frame_id
               JOIN total t ON c.run = t.run
               GROUP BY c.run, f.module, f.function)
SELECT module, function,
       ROUND(100 * COALESCE(MAX(CASE WHEN run = {b} THEN share END), 0), 2) AS before_pct,
       ROUND(100 * COALESCE(MAX(CASE WHEN run = {a} THEN share END), 0), 2) AS after_pct,
       ROUND(100 * (COALESCE(MAX(CASE WHEN run = {a} THEN share END), 0)
                  - COALESCE(MAX(CASE WHEN run = {b} THEN share END), 0)), 2) AS change_pct
FROM share
GROUP BY module, function
ORDER BY change_pct DESC, module, function
LIMIT 20"
    )
}

/// `s` as an SQL string literal.
pub fn quote(s: &str) -> String {
    format!("'{}'", s.replace('\'', "''"))
}

#[cfg(test)]
mod tests {
    #[test]
    fn run_names_are_quoted() {
        let sql = super::regressions("a'b", "c");
        assert!(sql.contains("'a''b'") && sql.contains("'c'"), "{sql}");
    }
}
