//! hanarang's own environment block, as `/proc/<pid>/environ` shows it to whoever may read
//! it (root, a sister running as root): a secret handed in a variable is zeroed there at
//! start, before any thread runs.

use std::ffi::{CStr, c_char};

/// Other threads run: the environment may not be changed.
#[derive(Debug)]
pub struct NotAlone;

/// Zeroes the value of every `name=` entry of the environment where the kernel shows it,
/// and returns the first value. With `keep`, the variable stays in the process's own
/// environment (a copy the C library makes, which `/proc` does not show): for a secret
/// hanarang itself still reads there (PostgreSQL's `PGPASSWORD`); else it is removed.
pub fn hide(name: &str, keep: bool) -> Result<Option<String>, NotAlone> {
    if std::env::var_os(name).is_none() {
        return Ok(None);
    }
    if !single_threaded() {
        return Err(NotAlone);
    }
    // SAFETY: `single_threaded` found this thread the only one, and it starts none: no
    // other thread reads or writes the environment meanwhile.
    let value = unsafe { zero(name) };
    // SAFETY: as above, no other thread runs.
    unsafe {
        match (&value, keep) {
            (Some(value), true) => std::env::set_var(name, value),
            _ => std::env::remove_var(name),
        }
    }
    Ok(value)
}

/// Whether this thread is the process's only one (`/proc/self/task` lists one).
fn single_threaded() -> bool {
    std::fs::read_dir("/proc/self/task").is_ok_and(|tasks| tasks.count() == 1)
}

unsafe extern "C" {
    /// The C library's environment: pointers to `NAME=value` strings, those from exec
    /// pointing into the block the kernel shows as `/proc/<pid>/environ`.
    static environ: *const *mut c_char;
}

/// Zeroes the value of every `name=` entry in place; the first value, as text.
///
/// # Safety
/// No other thread may run: the environment is read and written without its lock.
unsafe fn zero(name: &str) -> Option<String> {
    let prefix = format!("{name}=");
    let mut value = None;
    // SAFETY: `environ` is a null-terminated array of nul-terminated strings, valid while
    // nothing changes the environment, which nothing else does meanwhile (the caller's
    // promise). Each string's value is writable memory: the exec block or the C library's
    // own copy.
    unsafe {
        let mut entry = environ;
        while !entry.is_null() && !(*entry).is_null() {
            let found = CStr::from_ptr(*entry)
                .to_bytes()
                .strip_prefix(prefix.as_bytes())
                .map(|rest| {
                    if value.is_none() {
                        value = Some(String::from_utf8_lossy(rest).into_owned());
                    }
                    rest.len()
                });
            if let Some(len) = found {
                std::ptr::write_bytes((*entry).add(prefix.len()), 0, len);
            }
            entry = entry.add(1);
        }
    }
    value
}
