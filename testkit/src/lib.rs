//! What freshet's tests share, so that each helper exists once: the URL of the test server
//! (a test that needs it fails, never skips, when it is not set), database URLs derived from
//! it, a plain HTTP GET for the admin listener, the catalogs several tests declare, freshet
//! run in the test's own process, the freshet binary run as a child ([`process`]), a MariaDB
//! of a test's own ([`mariadb`]), a
//! seeded generator for test data ([`rng`]), and random SQL ([`sqlgen`]).
//!
//! A dev-dependency only (`publish = false`): nothing in a shipped crate depends on it. The
//! heavier parts are behind features so that a crate's tests compile only what they use:
//! `catalog` (freshet-dataflow), `freshet` (freshet-proxy) and `bench` (criterion: steps of
//! benches that can also be counted in instructions).

#[cfg(feature = "bench")]
pub mod bench;
#[cfg(feature = "catalog")]
pub mod catalog;
#[cfg(feature = "freshet")]
pub mod freshet;
pub mod http;
pub mod mariadb;
pub mod process;
pub mod rng;
pub mod sqlgen;

/// How to provide the test server; the panics below say it.
pub const HOW: &str =
    "start the project's MariaDB and export its environment first: `eval \"$(scripts/mariadb.sh)\"` from the repository root";

/// The test server's URL (`FRESHET_TEST_MYSQL_URL`, printed by scripts/mariadb.sh); panics
/// with how to set it when it is not set, so that a test needing the server fails instead of
/// passing without it.
pub fn mysql_url() -> String {
    std::env::var("FRESHET_TEST_MYSQL_URL")
        .unwrap_or_else(|_| panic!("FRESHET_TEST_MYSQL_URL is not set: this test needs a real MariaDB; {HOW}"))
}

/// `server`'s URL with its database replaced by `db`.
pub fn url_with_db(server: &str, db: &str) -> String {
    let base = server.rsplit_once('/').map_or(server, |(b, _)| b);
    format!("{base}/{db}")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn url_with_db_replaces_only_the_database() {
        assert_eq!(url_with_db("mysql://u:p@127.0.0.1:3306/a", "b"), "mysql://u:p@127.0.0.1:3306/b");
        assert_eq!(url_with_db("mysql://u:p@h:1/", "x"), "mysql://u:p@h:1/x");
    }
}
