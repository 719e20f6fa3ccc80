//! From a transition to Discord (issue 18), measured: `cargo bench --bench discord`. The
//! real orchestrator, SQLite database and scripted sisters, with the real bot (serenity +
//! poise, the bridge) against the fake Discord on loopback. `SPRINTS` sprints run to
//! `deployed`, each approved as soon as it is `done`. For every transition, the time from
//! its commit (`at` in the log) to the fake's receipt of its line (the request whose nonce
//! names the transition's `global_seq`): p50, p99 and the worst, and which transitions
//! the three worst were. Target: p99 under 50 ms
//! (docs/benchmarks/discord-delivery.md).

#[allow(dead_code)] // what every benchmark prints about the machine
#[path = "common/mod.rs"]
mod common;
#[allow(dead_code)] // the benchmark uses a part of the tests' support
#[path = "../tests/it/support/mod.rs"]
mod support;

use std::time::{Duration, Instant};

use hanarang::discord::{self, Token};
use hanarang::pipeline::State;
use hanarang::store::CommandKind;
use support::fake_discord::{FakeConfig, FakeDiscord};
use support::pipeline::{Files, Pipeline, Setup};

const SPRINTS: usize = 20;
/// One project per sprint, so they overlap as a busy deployment's do.
const PROJECTS: [&str; 4] = ["p0", "p1", "p2", "p3"];

fn main() {
    let rt = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .expect("a runtime");
    println!("{}", common::machine());
    rt.block_on(async {
        let fake = FakeDiscord::start(FakeConfig::default()).await;
        let files = Files::new(&Setup {
            projects: &PROJECTS,
            ..Setup::default()
        });
        files.append_config(&format!(
            "[discord]\ntoken_env = \"HANARANG_TEST_DISCORD_TOKEN\"\nguild_id = {}\nforum_channel_id = {}\nuser_id = 5\nhttp_proxy = \"{}\"\n",
            fake.config().guild_id,
            fake.config().forum_channel_id,
            fake.base_url()
        ));
        let p = Pipeline::start_with(files).await;
        // The bot on a runtime of its own, as `serve` runs it.
        let bot_rt = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(1)
            .enable_all()
            .build()
            .expect("the bot's runtime");
        let config = p.config.discord.clone().expect("a [discord] table");
        let (app, handle) = (p.config.clone(), p.handle.clone());
        let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
        let bot = bot_rt.spawn(async move {
            discord::run(app, config, handle, Token::new(fake_token()), async {
                let _ = stopped.await;
            })
            .await
        });
        assert!(
            fake.wait_until(Duration::from_secs(60), |f| f.ready_count() > 0
                && !f.commands().is_empty())
                .await,
            "the bot connected"
        );
        // Wall clock of a request's arrival, from the fake's monotonic stamp.
        let (base_instant, base_ms) = (Instant::now(), hanarang::clock::now_ms());
        let mut ids = Vec::new();
        for n in 0..SPRINTS {
            let s = p
                .start_sprint(PROJECTS[n % PROJECTS.len()], &format!("bench {n}"), None)
                .await;
            ids.push(s.id);
        }
        for id in &ids {
            p.wait_for(id, State::Done).await;
            p.command(id, CommandKind::Approve, None).await;
            p.wait_for(id, State::Deployed).await;
        }
        let mut log = Vec::new();
        for id in &ids {
            log.extend(p.transitions(id).await);
        }
        assert!(
            fake.wait_until(Duration::from_secs(60), |f| {
                let sent = f.requests();
                log.iter().all(|t| {
                    let nonce = format!("hanarang-{}", t.global_seq);
                    sent.iter().any(|r| r.body["nonce"] == nonce.as_str())
                })
            })
            .await,
            "every line reached the fake"
        );
        let sent = fake.requests();
        let mut timed: Vec<(Duration, String)> = log
            .iter()
            .filter_map(|t| {
                let nonce = format!("hanarang-{}", t.global_seq);
                let r = sent.iter().find(|r| r.body["nonce"] == nonce.as_str())?;
                let arrived = base_ms
                    + i64::try_from(r.at.saturating_duration_since(base_instant).as_millis())
                        .unwrap_or(0);
                let took = Duration::from_millis(u64::try_from(arrived - t.at).unwrap_or(0));
                Some((took, format!("{} {}→{}", t.sprint_id, t.from, t.to)))
            })
            .collect();
        timed.sort();
        let latency: Vec<Duration> = timed.iter().map(|(d, _)| *d).collect();
        let at = |q: f64| latency[((latency.len() as f64 - 1.0) * q).round() as usize];
        println!(
            "transition → its line at the fake Discord, {} transitions of {SPRINTS} sprints: p50 {} ms, p99 {} ms, worst {} ms",
            latency.len(),
            at(0.5).as_millis(),
            at(0.99).as_millis(),
            latency.last().map_or(0, |d| d.as_millis())
        );
        let worst: Vec<String> = timed
            .iter()
            .rev()
            .take(3)
            .map(|(d, line)| format!("{line} {} ms", d.as_millis()))
            .collect();
        println!("the worst: {}", worst.join(", "));
        let _ = stop.send(());
        let _ = bot.await;
        p.stop().await;
        bot_rt.shutdown_background();
    });
}

fn fake_token() -> &'static str {
    support::fake_discord::FAKE_TOKEN
}
