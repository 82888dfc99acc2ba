//! `news`: the example application's command line. See examples/README.md.
//!
//! ```text
//! news load --url URL [--users N] [--stories N] [--votes N] [--comments N]
//! news workload --url URL [--seconds S] [--connections C] [--writes PCT] [--skew Z]
//! ```

use std::time::Duration;

use anyhow::{Context, bail};
use freshet_examples::{load, workload};

const USAGE: &str = "usage: news load --url URL [--users N --stories N --votes N --comments N]\n       news workload --url URL [--seconds S --connections C --writes PCT --skew Z]";

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    let mut args = std::env::args().skip(1);
    let command = args.next().context(USAGE)?;
    let (mut url, mut sizes, mut opts) = (None, load::Sizes::default(), workload::Options::default());
    while let Some(flag) = args.next() {
        let mut value = || args.next().with_context(|| format!("{flag} needs a value\n{USAGE}"));
        match (command.as_str(), flag.as_str()) {
            (_, "--url") => url = Some(value()?),
            ("load", "--users") => sizes.users = value()?.parse()?,
            ("load", "--stories") => sizes.stories = value()?.parse()?,
            ("load", "--votes") => sizes.votes = value()?.parse()?,
            ("load", "--comments") => sizes.comments = value()?.parse()?,
            ("workload", "--seconds") => opts.duration = Duration::from_secs_f64(value()?.parse()?),
            ("workload", "--connections") => opts.connections = value()?.parse()?,
            ("workload", "--writes") => opts.writes = value()?.parse()?,
            ("workload", "--skew") => opts.skew = value()?.parse()?,
            _ => bail!("unknown argument {flag} for {command}\n{USAGE}"),
        }
    }
    let url = url.with_context(|| format!("--url is required\n{USAGE}"))?;
    match command.as_str() {
        "load" => {
            load::load(&url, sizes).await?;
            println!("loaded {sizes:?} into {}", freshet_examples::app::redact(&url));
        }
        "workload" => {
            let report = workload::run(&url, opts.clone()).await?;
            println!("{} connections, {}% writes, zipf skew {}, {:.1} s", opts.connections, opts.writes, opts.skew, report.elapsed.as_secs_f64());
            println!("{report}");
        }
        _ => bail!("unknown command {command}\n{USAGE}"),
    }
    Ok(())
}
