-- Retention relative to $1 (a timestamptz): see connector_stats_prune in
-- sql/0011_connector_stats.sql. Rows: (action, relation, rows removed).
SELECT action, relation, removed FROM connector_stats_prune($1::timestamptz)
