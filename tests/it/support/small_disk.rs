//! A file system that fills: a tmpfs of a few hundred KiB, mounted for one test and
//! unmounted when dropped. Mounting needs root (CI runs as root); elsewhere the test says
//! it cannot run, and under CI that is a failure, never a silent pass.

use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::Command;

use super::TempDir;

pub struct SmallDisk {
    dir: TempDir,
}

impl SmallDisk {
    /// A tmpfs of `kib` KiB; `None` where this process may not mount one.
    pub fn mount(label: &str, kib: u32) -> Option<SmallDisk> {
        let dir = TempDir::new(label);
        let mounted = Command::new("mount")
            .args(["-t", "tmpfs", "-o", &format!("size={kib}k"), "tmpfs"])
            .arg(dir.path())
            .output();
        match mounted {
            Ok(out) if out.status.success() => Some(SmallDisk { dir }),
            other => {
                let why = match other {
                    Ok(out) => String::from_utf8_lossy(&out.stderr).trim().to_string(),
                    Err(e) => e.to_string(),
                };
                assert!(
                    std::env::var_os("CI").is_none(),
                    "CI must be able to mount a tmpfs (it runs as root): {why}"
                );
                eprintln!("skipped: cannot mount a tmpfs here (needs root): {why}");
                None
            }
        }
    }

    pub fn path(&self) -> &Path {
        self.dir.path()
    }

    /// Fills what is left of it with a file of zeros.
    pub fn fill(&self) -> PathBuf {
        let filler = self.path().join("filler");
        let mut file = std::fs::File::create(&filler).expect("create the filler");
        let chunk = [0u8; 4096];
        while file.write_all(&chunk).is_ok() {}
        let _ = file.sync_all();
        filler
    }

    /// Gives it room again: `kib` KiB in all.
    pub fn grow(&self, kib: u32) {
        let out = Command::new("mount")
            .args(["-o", &format!("remount,size={kib}k")])
            .arg(self.path())
            .output()
            .expect("run mount");
        assert!(
            out.status.success(),
            "remount: {}",
            String::from_utf8_lossy(&out.stderr)
        );
    }
}

impl Drop for SmallDisk {
    fn drop(&mut self) {
        let _ = Command::new("umount").arg("-l").arg(self.path()).output();
    }
}
