//! A long text costs freshet a bounded multiple of its length, whatever it holds. Texts under
//! 16 MiB are held whole; freshet reads the statements of those it does not answer for what
//! they do to the session (SET, USE, a privilege statement, binlogging turned off). It read
//! them into a vector of every token: a 15 MiB text of `DO 1;` statements (6 million tokens
//! of 24 bytes) held ~270 MiB while it was read, so a few sessions sending such texts at once
//! could take the sidecar past its pod's memory. Its own test binary: it measures the
//! process's peak resident set (VmHWM), which other tests running alongside would move.

mod common;

use common::*;
use mysql_async::prelude::*;

fn peak_resident_bytes() -> u64 {
    process_status_bytes("VmHWM")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn long_texts_cost_a_bounded_multiple_of_their_length() {
    let proxy = start_proxy("").await;
    // Every statement a token pair and a `;`, each kind of text the session reads.
    let count = 3 * 1024 * 1024 - 16;
    // The server stops at the first statement that fails (`DO x`, an unknown column), so it
    // runs one or two of them; freshet reads them all before it forwards the text.
    let texts = [
        format!("DO x;{}", "DO 1;".repeat(count)),
        format!("SET @a = 1;DO x;{}", "DO 1;".repeat(count - 3)),
        format!("GRANT SELECT ON nosuch.t TO nobody;{}", "DO 1;".repeat(count - 8)),
        format!("SELECT /*!1 1 */;DO x;{}", "DO 1;".repeat(count - 4)),
    ];
    let length: usize = texts.iter().map(String::len).sum();
    let mut sessions = Vec::new();
    for _ in &texts {
        sessions.push(through(&proxy).await);
    }
    let before = peak_resident_bytes();
    let mut sent = tokio::task::JoinSet::new();
    for (text, mut conn) in texts.into_iter().zip(sessions) {
        sent.spawn(async move {
            // Refused or not, the server answers; what matters is what freshet held meanwhile.
            let _ = conn.query_drop(text.as_str()).await;
            conn.query_first::<u8, _>("SELECT 1").await.unwrap()
        });
    }
    let answers = sent.join_all().await;
    assert!(answers.iter().all(|a| *a == Some(1)), "each session still answers: {answers:?}");
    let grown = peak_resident_bytes().saturating_sub(before);
    eprintln!("{} MiB of texts, peak grew {} MiB", length >> 20, grown >> 20);
    // The client's copies of the texts and freshet's (the packet, its frames) are a few times
    // their length; a vector of their tokens was 18 times it.
    assert!(grown < 6 * length as u64, "{} MiB of texts at once grew the peak resident set {} MiB", length >> 20, grown >> 20);
}
