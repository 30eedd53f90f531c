//! The VMs of the Akita experiments: cgroups (plain, or libvirt's layout for
//! a real QEMU), the vms.toml schedbe gets, and their processes, allowed on
//! the VM CPUs only (for EEVDF that is the paper's "same pinning"; under
//! akita each vCPU's home is one of them anyway).

use std::fmt::Write as _;
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::Duration;

use anyhow::{bail, Context, Result};

use crate::proc::{child_setup, join_cgroup_on_exec, log_pair, Proc};

pub const ROOT: &str = "/sys/fs/cgroup";
/// Everything the Akita experiments create lives under this cgroup.
pub const BASE: &str = "schedbe-bench-akita";

/// One VM: its name, criticality and Table 1 type.
#[derive(Clone, Debug)]
pub struct Vm {
    pub name: String,
    pub hi: bool,
    pub vm_type: u32,
    /// A real QEMU in libvirt's layout (machine.slice/.../libvirt/vcpu0).
    pub qemu: bool,
}

impl Vm {
    pub fn new(name: &str, hi: bool, vm_type: u32) -> Self {
        Vm { name: name.into(), hi, vm_type, qemu: false }
    }

    /// Its cgroup, relative to the root.
    pub fn cgroup(&self) -> String {
        if self.qemu {
            format!("{BASE}/machine.slice/machine-qemu\\x2d1\\x2d{}.scope", self.name)
        } else {
            format!("{BASE}/{}", self.name)
        }
    }
}

fn write(p: &Path, v: &str) -> Result<()> {
    std::fs::write(p, v).with_context(|| format!("write {v:?} to {}", p.display()))
}

fn mkdir(p: &Path) -> Result<()> {
    if !p.exists() {
        std::fs::create_dir(p).with_context(|| format!("mkdir {}", p.display()))?;
    }
    Ok(())
}

/// Remove a cgroup tree bottom-up (its processes must be gone).
pub fn remove_tree(p: &Path) {
    if let Ok(rd) = std::fs::read_dir(p) {
        for e in rd.flatten() {
            if e.file_type().map(|t| t.is_dir()).unwrap_or(false) {
                remove_tree(&e.path());
            }
        }
    }
    for _ in 0..50 {
        if std::fs::remove_dir(p).is_ok() || !p.exists() {
            return;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// Create the VMs' cgroups fresh, with the cpu controller down to them.
pub fn make_cgroups(vms: &[Vm]) -> Result<()> {
    let root = Path::new(ROOT);
    remove_tree(&root.join(BASE));
    write(&root.join("cgroup.subtree_control"), "+cpu")?;
    mkdir(&root.join(BASE))?;
    write(&root.join(BASE).join("cgroup.subtree_control"), "+cpu")?;
    for vm in vms {
        if !vm.qemu {
            mkdir(&root.join(vm.cgroup()))?;
            continue;
        }
        // libvirt: machine.slice/machine-qemu\x2dN\x2dNAME.scope/libvirt/{emulator,vcpu0},
        // the last two threaded so that single threads can be moved.
        let slice = root.join(BASE).join("machine.slice");
        mkdir(&slice)?;
        write(&slice.join("cgroup.subtree_control"), "+cpu")?;
        let scope = root.join(vm.cgroup());
        mkdir(&scope)?;
        write(&scope.join("cgroup.subtree_control"), "+cpu")?;
        let lv = scope.join("libvirt");
        mkdir(&lv)?;
        for sub in ["emulator", "vcpu0"] {
            mkdir(&lv.join(sub))?;
            write(&lv.join(sub).join("cgroup.type"), "threaded")?;
        }
        write(&lv.join("cgroup.subtree_control"), "+cpu")?;
    }
    Ok(())
}

/// vms.toml for schedbe: the VMs on `cpus` (first-fit), one vCPU each.
pub fn vms_toml(vms: &[Vm], cpus: &[usize]) -> String {
    let list: Vec<String> = cpus.iter().map(|c| c.to_string()).collect();
    let mut s = format!("cpus = \"{}\"\ninitial_temperature = 5\n", list.join(","));
    for vm in vms {
        let _ = write!(
            s,
            "\n[[vm]]\nname = \"{}\"\ncgroup = \"{}\"\ncriticality = \"{}\"\ntype = {}\nvcpus = 1\n",
            vm.name,
            vm.cgroup().replace('\\', "\\\\"),
            if vm.hi { "HI" } else { "LO" },
            vm.vm_type
        );
    }
    s
}

/// Start `cmd` in cgroup `rel` (joined before exec), allowed on `cpus` only.
pub fn spawn_in(name: &str, mut cmd: Command, rel: &str, cpus: &[usize], dir: &Path) -> Result<Proc> {
    let set = crate::sys::cpu_set(cpus)?;
    let (o, e) = log_pair(dir, &format!("{name}.log"))?;
    cmd.stdin(Stdio::null()).stdout(o).stderr(e);
    child_setup(&mut cmd, libc::SIGKILL, None);
    join_cgroup_on_exec(&mut cmd, &PathBuf::from(ROOT).join(rel))?;
    // SAFETY: only async-signal-safe calls between fork and exec.
    unsafe {
        cmd.pre_exec(move || crate::sys::apply_cpu_set(&set));
    }
    Proc::spawn(name, &mut cmd)
}

/// A 512-byte boot sector that spins forever (`jmp $`): a guest whose one
/// vCPU is always busy.
pub fn busy_guest_image(dir: &Path) -> Result<PathBuf> {
    let mut mbr = vec![0u8; 512];
    mbr[0] = 0xeb;
    mbr[1] = 0xfe;
    mbr[510] = 0x55;
    mbr[511] = 0xaa;
    let p = dir.join("busy-guest.img");
    std::fs::write(&p, &mbr).with_context(|| format!("write {}", p.display()))?;
    Ok(p)
}

/// A real QEMU (TCG) running the busy guest, placed as libvirt places it:
/// the process in libvirt/emulator, its vCPU thread ("CPU 0/TCG") in
/// libvirt/vcpu0.
pub fn spawn_qemu(vm: &Vm, cpus: &[usize], dir: &Path) -> Result<Proc> {
    let img = busy_guest_image(dir)?;
    let mut c = Command::new("qemu-system-x86_64");
    c.args(["-accel", "tcg", "-m", "32", "-smp", "1", "-display", "none", "-serial", "none", "-monitor", "none", "-nodefaults"]);
    // debug-threads names the vCPU thread "CPU 0/TCG", as libvirt has QEMU do
    c.arg("-name").arg(format!("{},debug-threads=on", vm.name));
    c.arg("-drive").arg(format!("format=raw,file={},if=floppy", img.display()));
    // Into the threaded domain (libvirt), then thread by thread as libvirt does.
    let rel = format!("{}/libvirt", vm.cgroup());
    let p = spawn_in(&vm.name, c, &rel, cpus, dir)?;
    let task_dir = PathBuf::from(format!("/proc/{}/task", p.pid()));
    let lv = PathBuf::from(ROOT).join(&rel);
    // The vCPU thread appears once QEMU has set the machine up.
    for _ in 0..200 {
        let tasks: Vec<(String, String)> = std::fs::read_dir(&task_dir)
            .map(|rd| {
                rd.flatten()
                    .map(|t| (t.file_name().to_string_lossy().into_owned(), std::fs::read_to_string(t.path().join("comm")).unwrap_or_default()))
                    .collect()
            })
            .unwrap_or_default();
        if let Some((tid, _)) = tasks.iter().find(|(_, comm)| comm.trim().starts_with("CPU 0")) {
            write(&lv.join("vcpu0/cgroup.threads"), tid)?;
            for (other, _) in tasks.iter().filter(|(t, _)| t != tid) {
                let _ = std::fs::write(lv.join("emulator/cgroup.threads"), other);
            }
            return Ok(p);
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    bail!("qemu-system-x86_64 started but no vCPU thread (\"CPU 0/TCG\") appeared in 10 s; see {}/{}.log", dir.display(), vm.name)
}

/// CPU time of a cgroup so far, in µs (cpu.stat usage_usec).
pub fn usage_usec(rel: &str) -> u64 {
    std::fs::read_to_string(PathBuf::from(ROOT).join(rel).join("cpu.stat"))
        .ok()
        .and_then(|s| s.lines().find_map(|l| l.strip_prefix("usage_usec ").and_then(|v| v.trim().parse().ok())))
        .unwrap_or(0)
}
