//! Reading the same small kernel files every sample, cheaply.
//!
//! The agent reads three files per sandbox and two of /proc every interval.
//! `fs::read_to_string` costs an open, a statx, three or four reads (kernfs
//! reports size 0, so the buffer grows from 32 bytes) and a close: about
//! seven system calls a file, ~550 a sample for 20 sandboxes, and under
//! overload, when the reports matter most, each of them waits for a CPU.
//!
//! Files on procfs, sysfs and cgroupfs stay open instead and are read again
//! from offset 0 with one `pread`: their seq_file regenerates the text
//! when read at offset 0, and a cgroup removed since answers ENODEV, after
//! which the path is opened afresh (it may be a new cgroup of the same name).
//! Files on other filesystems (a fake tree in tests or `--cgroup-root`) are
//! opened each time, so that a file replaced or removed there is seen as such.
//! A file not read during a whole sample is closed; at most [`MAX_OPEN`] stay
//! open, the rest are read the plain way.

use std::collections::HashMap;
use std::fs::File;
use std::io;
use std::os::unix::fs::FileExt;
use std::os::unix::io::AsRawFd;
use std::path::{Path, PathBuf};

/// Files kept open at most: under the usual soft limit of 1024 descriptors.
pub const MAX_OPEN: usize = 768;

pub struct Files {
    open: HashMap<PathBuf, Kept>,
    sample: u64,
    buf: Vec<u8>,
}

struct Kept {
    file: File,
    /// The sample that last read it.
    used: u64,
}

impl Files {
    pub fn new() -> Self {
        Self { open: HashMap::new(), sample: 0, buf: vec![0; 4096] }
    }

    /// A new sample starts: close the files the last one did not read (its
    /// sandbox is gone, or its pattern no longer matches).
    pub fn begin_sample(&mut self) {
        let last = self.sample;
        self.open.retain(|_, k| k.used >= last);
        self.sample += 1;
    }

    /// How many files are kept open.
    #[cfg(test)]
    fn kept(&self) -> usize {
        self.open.len()
    }

    /// The whole text of `path`.
    pub fn read(&mut self, path: &Path) -> io::Result<String> {
        if let Some(k) = self.open.get_mut(path) {
            k.used = self.sample;
            match read_from_start(&k.file, &mut self.buf) {
                Ok(text) => return Ok(text),
                // ENODEV: the cgroup was removed; open the path again below
                Err(_) => drop(self.open.remove(path)),
            }
        }
        let file = File::open(path)?;
        let text = read_from_start(&file, &mut self.buf)?;
        if self.open.len() < MAX_OPEN && regenerates_at_zero(&file) {
            self.open.insert(path.to_path_buf(), Kept { file, used: self.sample });
        }
        Ok(text)
    }
}

/// procfs, sysfs and cgroup2: files whose text is made afresh when read at offset 0.
fn regenerates_at_zero(f: &File) -> bool {
    const PROC_SUPER_MAGIC: i64 = 0x9fa0;
    const SYSFS_MAGIC: i64 = 0x6265_6572;
    const CGROUP2_SUPER_MAGIC: i64 = 0x6367_7270;
    // SAFETY: fstatfs writes one statfs into the zeroed struct and reads an open descriptor.
    let mut st: libc::statfs = unsafe { std::mem::zeroed() };
    if unsafe { libc::fstatfs(f.as_raw_fd(), &mut st) } != 0 {
        return false;
    }
    matches!(st.f_type as i64, PROC_SUPER_MAGIC | SYSFS_MAGIC | CGROUP2_SUPER_MAGIC)
}

/// Read from offset 0 to the end. A read that does not fill the buffer is the
/// end (a seq_file returns every remaining record that fits), so a small file
/// costs one system call; a full one grows the buffer and goes on.
fn read_from_start(f: &File, buf: &mut Vec<u8>) -> io::Result<String> {
    let mut n = 0;
    loop {
        if n == buf.len() {
            buf.resize(buf.len() * 2, 0);
        }
        let k = f.read_at(&mut buf[n..], n as u64)?;
        n += k;
        if k == 0 || n < buf.len() {
            break;
        }
    }
    String::from_utf8(buf[..n].to_vec()).map_err(|e| io::Error::new(io::ErrorKind::InvalidData, e))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testtree::TempTree;

    #[test]
    fn proc_files_stay_open_and_read_fresh() {
        let mut f = Files::new();
        // the calling thread's: tests run on worker threads, and /proc/self is the process leader
        let p = Path::new("/proc/thread-self/schedstat");
        f.begin_sample();
        let a = f.read(p).unwrap();
        assert_eq!(f.kept(), 1);
        // burn some CPU: this thread's run time (first field) must have grown
        let mut x = 0u64;
        for i in 0..20_000_000u64 {
            x = x.wrapping_mul(31).wrapping_add(i);
        }
        std::hint::black_box(x);
        let b = f.read(p).unwrap();
        let ran = |s: &str| s.split_whitespace().next().unwrap().parse::<u64>().unwrap();
        assert!(ran(&b) > ran(&a), "{a:?} then {b:?}");
        assert_eq!(f.kept(), 1);
        // not read for a whole sample: closed
        f.begin_sample();
        f.begin_sample();
        assert_eq!(f.kept(), 0);
    }

    #[test]
    fn plain_files_are_read_each_time_and_large_ones_whole() {
        let t = TempTree::new("files");
        let p = t.root().join("x");
        let mut f = Files::new();
        f.begin_sample();
        t.write(Path::new("x"), "one\n");
        assert_eq!(f.read(&p).unwrap(), "one\n");
        assert_eq!(f.kept(), 0, "a regular file is not kept open");
        let big = "y".repeat(10_000);
        t.write(Path::new("x"), &big);
        assert_eq!(f.read(&p).unwrap(), big);
        std::fs::remove_file(&p).unwrap();
        assert_eq!(f.read(&p).unwrap_err().kind(), io::ErrorKind::NotFound);
    }
}
