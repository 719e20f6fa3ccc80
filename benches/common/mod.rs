//! What both benchmarks report about the machine they ran on, and the numbers they both
//! print.

use std::time::Duration;

pub const MIB: f64 = 1024.0 * 1024.0;

pub fn machine() -> String {
    let cpus = std::thread::available_parallelism().map_or(0, |n| n.get());
    let model = std::fs::read_to_string("/proc/cpuinfo")
        .ok()
        .and_then(|info| {
            info.lines()
                .find(|l| l.starts_with("model name"))
                .and_then(|l| l.split_once(':'))
                .map(|(_, m)| m.trim().to_string())
        })
        .unwrap_or_else(|| "unknown CPU".into());
    format!("{cpus} CPUs, {model}")
}

/// The type of the file system `path` is on: the longest mount point in /proc/mounts
/// that holds it.
pub fn fs_type(path: &std::path::Path) -> Option<String> {
    let path = path.canonicalize().ok()?;
    let mounts = std::fs::read_to_string("/proc/mounts").ok()?;
    mounts
        .lines()
        .filter_map(|line| {
            let mut fields = line.split_whitespace();
            let (_, point, kind) = (fields.next()?, fields.next()?, fields.next()?);
            path.starts_with(point)
                .then(|| (point.len(), kind.to_string()))
        })
        .max_by_key(|(len, _)| *len)
        .map(|(_, kind)| kind)
}

/// The median (of an even count, the mean of the middle two); zero for no samples.
pub fn median(samples: &[Duration]) -> Duration {
    let mut sorted = samples.to_vec();
    sorted.sort_unstable();
    match sorted.len() {
        0 => Duration::ZERO,
        n if n % 2 == 1 => sorted[n / 2],
        n => (sorted[n / 2 - 1] + sorted[n / 2]) / 2,
    }
}

/// Microseconds, rounded: `412 µs`.
pub fn us(d: Duration) -> String {
    format!("{:.0} µs", d.as_secs_f64() * 1e6)
}

pub fn mib(bytes: u64) -> String {
    format!("{:.1} MiB", bytes as f64 / MIB)
}

/// The release `hanarang` that `cargo bench` builds beside the benchmark.
pub fn hanarang_binary() -> std::path::PathBuf {
    let built = std::path::PathBuf::from(env!("CARGO_BIN_EXE_hanarang"));
    if built.is_file() {
        return built;
    }
    // target/release/deps/<bench>-<hash> → target/release/hanarang
    let exe = std::env::current_exe().expect("this benchmark's executable");
    let beside = exe
        .parent()
        .and_then(std::path::Path::parent)
        .map(|d| d.join("hanarang"))
        .filter(|p| p.is_file());
    beside.unwrap_or_else(|| panic!("no hanarang binary at {}", built.display()))
}
