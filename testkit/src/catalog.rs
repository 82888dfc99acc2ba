//! Catalogs that several tests declare the same way.

use freshet_dataflow::{Catalog, Collation, ColumnSchema, SqlType, TableSchema};

/// A signed integer column of `bytes` bytes.
pub fn int(name: &str, bytes: u8) -> ColumnSchema {
    ColumnSchema::new(name, SqlType::Int { bytes, unsigned: false })
}

/// A text column with utf8mb4_general_ci, MariaDB's default collation for the tests' tables.
pub fn text_ci(name: &str) -> ColumnSchema {
    ColumnSchema::new(name, SqlType::Text).with_collation(Some(Collation::Utf8mb4GeneralCi))
}

/// The news schema's four tables (BIGINT ids, case-insensitive text).
pub fn news() -> Catalog {
    let i = |n: &str| int(n, 8);
    let mut c = Catalog::new();
    c.add(TableSchema::new("users", vec![i("id"), text_ci("name")], vec![0])).expect("users");
    c.add(TableSchema::new("stories", vec![i("id"), i("author_id"), text_ci("title")], vec![0])).expect("stories");
    c.add(TableSchema::new("comments", vec![i("id"), i("story_id"), i("author_id"), text_ci("body")], vec![0])).expect("comments");
    c.add(TableSchema::new("votes", vec![i("user_id"), i("story_id")], vec![0, 1])).expect("votes");
    c
}

/// Two tables `a(id, k, g, x, s)` and `b(id, k, y, s)` of INT columns and one text column,
/// the oracle tests' schema. The ids are `NOT NULL` (primary keys), the rest nullable.
pub fn ab() -> Catalog {
    let i = |n: &str| int(n, 4);
    let mut c = Catalog::new();
    c.add(TableSchema::new("a", vec![i("id").not_null(), i("k"), i("g"), i("x"), text_ci("s")], vec![0])).expect("a");
    c.add(TableSchema::new("b", vec![i("id").not_null(), i("k"), i("y"), text_ci("s")], vec![0])).expect("b");
    c
}
