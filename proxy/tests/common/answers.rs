//! Answers as a driver sees them, to compare a connection through freshet with one to the
//! server: column definitions, rows, or the server's error.

use freshet_testkit::rng::Rng;
use mysql_async::prelude::*;
use mysql_async::{Conn, Value};

/// A column as a driver sees it: schema, table, name, type, flags, length, character set,
/// decimals.
pub type ColumnView = (String, String, String, u8, u16, u32, u16, u8);
/// Each result set of a text (column definitions and rows), or the server's error.
pub type Answer = Result<Vec<(Vec<ColumnView>, Vec<Vec<Value>>)>, String>;

pub fn columns_of(cols: &[mysql_async::Column]) -> Vec<ColumnView> {
    cols.iter()
        .map(|c| {
            (
                c.schema_str().into_owned(),
                c.table_str().into_owned(),
                c.name_str().into_owned(),
                c.column_type() as u8,
                c.flags().bits(),
                c.column_length(),
                c.character_set(),
                c.decimals(),
            )
        })
        .collect()
}

/// The server's error as its code and message; any other as the driver says it (a
/// difference is then shown with the steps that led to it).
pub fn server_error(e: mysql_async::Error) -> String {
    match e {
        mysql_async::Error::Server(s) => format!("{}: {}", s.code, s.message),
        other => format!("not a server error: {other}"),
    }
}

/// Every result set of a text, or the first error. mysql_async may take a text of several
/// statements for done while a later statement's error is still to be read, and answers the
/// connection's next command with that error (the command is then never sent): a ping takes
/// it here.
pub async fn text(conn: &mut Conn, sql: &str) -> Answer {
    let mut sets = Vec::new();
    let outcome = async {
        let mut result = conn.query_iter(sql).await?;
        while !result.is_empty() {
            let columns = result.columns().map(|c| columns_of(&c)).unwrap_or_default();
            let rows: Vec<mysql_async::Row> = result.collect().await?;
            sets.push((columns, rows.into_iter().map(|r| r.unwrap()).collect()));
        }
        Ok::<_, mysql_async::Error>(())
    }
    .await;
    // Only a text of several statements (a ping sets ROW_COUNT() to 0, which a diagnostics
    // step would read otherwise).
    let pending = if sql.trim_end_matches(';').contains(';') { conn.ping().await } else { Ok(()) };
    outcome.and(pending).map_err(server_error)?;
    Ok(sets)
}

/// A prepared read's answer. MariaDB describes an execute's columns to a driver that caches
/// metadata (MARIADB_CLIENT_CACHE_METADATA, which mysql_async asks of the server and freshet
/// does not offer) as the prepare described them, in the column's character set, and to one
/// that does not in the session's `character_set_results`: their character sets and lengths
/// are not compared here (the byte-for-byte tests in `cached/` compare them).
pub async fn prepared(conn: &mut Conn, sql: impl mysql_async::prelude::StatementLike, key: Value) -> Answer {
    let mut result = conn.exec_iter(sql, vec![key]).await.map_err(server_error)?;
    let columns = result
        .columns()
        .map(|c| columns_of(&c).into_iter().map(|(s, t, n, ty, f, _, _, d)| (s, t, n, ty, f, 0, 0, d)).collect())
        .unwrap_or_default();
    let rows: Vec<mysql_async::Row> = result.collect().await.map_err(server_error)?;
    Ok(vec![(columns, rows.into_iter().map(|r| r.unwrap()).collect())])
}

pub fn pick<'a, T>(rng: &mut Rng, items: &'a [T]) -> &'a T {
    &items[rng.below(items.len() as u64) as usize]
}

/// The key of a cached read: the primary key (multiples of 3), a group number (0-4), a name.
#[derive(Clone, Copy)]
pub enum Key {
    Id,
    K,
    Name,
}

/// A key of `kind`, as a value and as a literal, names drawn from `names`; now and then one of
/// another type (a string for a number, a number for a string).
pub fn key(rng: &mut Rng, kind: Key, names: &[&str]) -> (Value, String) {
    let n = rng.below(12) as i64;
    match (kind, rng.below(10)) {
        (Key::Id | Key::K, 0) => (Value::Bytes(format!("{n}").into_bytes()), format!("'{n}'")),
        (Key::Id, _) => (Value::Int(n * 3), format!("{}", n * 3)),
        (Key::K, _) => (Value::Int(n % 5), format!("{}", n % 5)),
        (Key::Name, 0) => (Value::Int(n), format!("{n}")),
        (Key::Name, _) => {
            let name = pick(rng, names);
            (Value::Bytes(name.as_bytes().to_vec()), format!("'{name}'"))
        }
    }
}
