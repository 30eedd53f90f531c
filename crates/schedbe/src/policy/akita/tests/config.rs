//! vms.toml: Table 1 defaults, overrides, and one test per kind of mistake.

use super::super::config::{AkitaConfig, Vcpus};
use super::super::edfvd::Server;
use super::super::table1::TABLE1;
use super::{hi, lo, type1, type2, EXAMPLE};

const HEAD: &str = "cpus = \"0-3\"\ninitial_temperature = 5\n";

/// One VM named "v" after HEAD; `body` is its keys.
fn one_vm(body: &str) -> String {
    format!("{HEAD}[[vm]]\nname = \"v\"\ncgroup = \"akita/v\"\n{body}\n")
}

fn parse_err(text: &str) -> String {
    match AkitaConfig::parse(text) {
        Ok(c) => panic!("accepted: {c:?}\n{text}"),
        Err(e) => format!("{e:#}"),
    }
}

#[test]
fn the_example_is_fig5() {
    let c = AkitaConfig::parse(EXAMPLE).unwrap();
    assert_eq!(c.cpus, [0, 1, 2, 3]);
    assert_eq!(c.initial_temperature, 5);
    let names: Vec<&str> = c.vms.iter().map(|v| v.name.as_str()).collect();
    assert_eq!(names, ["memcached", "lookbusy-1", "lookbusy-2", "lookbusy-3"]);
    assert_eq!(c.vms[0].server, type1());
    assert_eq!((c.vms[0].vm_type, c.vms[0].cgroup.as_str()), (Some(1), "akita/memcached"));
    assert!(c.vms[1..].iter().all(|v| v.server == type2() && v.vcpus == Vcpus::Count(1) && v.cpus.is_none()));
}

#[test]
fn every_table1_type_loads_with_its_numbers() {
    let mut text = HEAD.to_string();
    for t in &TABLE1 {
        text += &format!("[[vm]]\nname = \"t{0}\"\ncgroup = \"t{0}\"\ncriticality = \"{1}\"\ntype = {0}\nvcpus = 1\n", t.id, t.crit);
    }
    let c = AkitaConfig::parse(&text).unwrap();
    // Table 1: 1 HI 5/25/100, 2 LO 25/100, 3 LO 50/100, 4 LO 5/50, 5 LO 10/100, 6 HI 10/50/100
    let want = [hi(5, 25, 100), lo(25, 100), lo(50, 100), lo(5, 50), lo(10, 100), hi(10, 50, 100)];
    let got: Vec<Server> = c.vms.iter().map(|v| v.server).collect();
    assert_eq!(got, want);
}

#[test]
fn explicit_values_override_the_type_or_stand_alone() {
    let c = AkitaConfig::parse(&one_vm("criticality = \"HI\"\ntype = 1\nperiod_ms = 50\nvcpus = 2")).unwrap();
    assert_eq!(c.vms[0].server, hi(5, 25, 50));
    assert_eq!(c.vms[0].vcpus, Vcpus::Count(2));
    let c = AkitaConfig::parse(&one_vm("criticality = \"lo\"\nc_opt_ms = 0.5\nperiod_ms = 2\nvcpus = \"threads\"\ncpus = \"2,3\""));
    let v = &c.unwrap().vms[0];
    assert_eq!(v.server, Server::Lo { c_opt_us: 500, period_us: 2000 });
    assert_eq!((v.vcpus, v.cpus.as_deref()), (Vcpus::Threads, Some(&[2u32, 3][..])));
    // C_opt = C_pes = T is allowed (a dedicated CPU's worth).
    let c = AkitaConfig::parse(&one_vm("criticality = \"HI\"\nc_opt_ms = 10\nc_pes_ms = 10\nperiod_ms = 10\nvcpus = 1"));
    assert_eq!(c.unwrap().vms[0].server, hi(10, 10, 10));
}

#[test]
fn no_vms_is_valid() {
    let c = AkitaConfig::parse(HEAD).unwrap();
    assert!(c.vms.is_empty());
}

#[test]
fn bad_global_keys() {
    let cases = [
        ("initial_temperature = 5\n", "missing field `cpus`"),
        ("cpus = \"0-3\"\n", "missing field `initial_temperature`"),
        ("cpus = \"3-1\"\ninitial_temperature = 5\n", "cpus"),
        ("cpus = \"\"\ninitial_temperature = 5\n", "empty CPU list"),
        ("cpus = \"0-99999\"\ninitial_temperature = 5\n", "0-99999"),
        ("cpus = \"0-3\"\ninitial_temperature = 0\n", "initial_temperature = 0 is out of range [1, 1000]"),
        ("cpus = \"0-3\"\ninitial_temperature = 1001\n", "initial_temperature = 1001"),
        ("cpus = \"0-3\"\ninitial_temperature = -1\n", "initial_temperature = -1"),
        ("cpus = \"0-3\"\ninitial_temperature = 5\nspeed = 1\n", "unknown field `speed`"),
        ("cpus = \"0-3\"\ninitial_temperature = 5\n[[vm]]\nname = \"v\"\n", "missing field"),
    ];
    for (text, want) in cases {
        let e = parse_err(text);
        assert!(e.contains(want), "{text:?}: {e}");
    }
}

#[test]
fn bad_vm_values_name_the_vm_and_the_field() {
    let ok = "criticality = \"HI\"\ntype = 1\nvcpus = 1";
    let cases = [
        (format!("{ok}\nspeed = 3"), "unknown field `speed`"),
        ("criticality = \"MID\"\ntype = 1\nvcpus = 1".into(), "unknown variant `MID`"),
        ("criticality = \"HI\"\ntype = 7\nvcpus = 1".into(), "type = 7: Table 1 has types 1-6"),
        ("criticality = \"HI\"\ntype = -1\nvcpus = 1".into(), "type = -1"),
        ("criticality = \"HI\"\ntype = 2\nvcpus = 1".into(), "criticality HI contradicts type 2, which is LO"),
        ("criticality = \"LO\"\ntype = 2\nc_pes_ms = 30\nvcpus = 1".into(), "a LO VM has no pessimistic budget"),
        ("criticality = \"HI\"\nc_opt_ms = 5\nperiod_ms = 100\nvcpus = 1".into(), "c_pes_ms is missing"),
        ("criticality = \"LO\"\nc_opt_ms = 5\nvcpus = 1".into(), "period_ms is missing"),
        ("criticality = \"LO\"\nperiod_ms = 5\nvcpus = 1".into(), "c_opt_ms is missing"),
        (format!("{ok}\nc_opt_ms = 30"), "need C_opt <= C_pes <= T, got c_opt_ms = 30, c_pes_ms = 25"),
        (format!("{ok}\nc_pes_ms = 120"), "c_pes_ms = 120, period_ms = 100"),
        ("criticality = \"LO\"\ntype = 2\nperiod_ms = 20\nvcpus = 1".into(), "c_opt_ms = 25 is above period_ms = 20"),
        (format!("{ok}\nc_opt_ms = 0"), "c_opt_ms = 0 is out of range"),
        (format!("{ok}\nc_opt_ms = -5"), "c_opt_ms = -5 is out of range"),
        (format!("{ok}\nc_opt_ms = nan"), "c_opt_ms = NaN is out of range"),
        (format!("{ok}\nperiod_ms = inf"), "period_ms = inf is out of range"),
        (format!("{ok}\nperiod_ms = 20000"), "period_ms = 20000 is out of range [0.001, 10000]"),
        (format!("{ok}\nc_opt_ms = 0.0015"), "c_opt_ms = 0.0015 is not a whole number of microseconds"),
        ("criticality = \"HI\"\ntype = 1".into(), "missing field `vcpus`"),
        ("criticality = \"HI\"\ntype = 1\nvcpus = 0".into(), "vcpus = 0 is out of range [1, 1024]"),
        ("criticality = \"HI\"\ntype = 1\nvcpus = 5000".into(), "vcpus = 5000"),
        ("criticality = \"HI\"\ntype = 1\nvcpus = -1".into(), "a vCPU count or \"threads\""),
        ("criticality = \"HI\"\ntype = 1\nvcpus = \"lots\"".into(), "a vCPU count or \"threads\""),
        (format!("{ok}\ncpus = \"2-5\""), "CPU 4-5 not in the global cpus (0-3)"),
        (format!("{ok}\ncpus = \"x\""), "cpus"),
    ];
    for (body, want) in cases {
        let e = parse_err(&one_vm(&body));
        assert!(e.contains(want), "{body:?}: {e}");
        // Errors found after parsing say which VM; serde's carry the line.
        assert!(e.contains("vm \"v\"") || e.contains("line "), "{body:?}: {e}");
    }
}

#[test]
fn bad_names_and_cgroups() {
    let vm = |name: &str, cg: &str| format!("[[vm]]\nname = \"{name}\"\ncgroup = \"{cg}\"\ncriticality = \"LO\"\ntype = 2\nvcpus = 1\n");
    let cases = [
        (vm("a b", "x"), "name must be"),
        (vm("", "x"), "name must be"),
        (vm("v", "/sys/fs/cgroup/x"), "must be relative to /sys/fs/cgroup"),
        (vm("v", "a/../b"), "no empty, \".\" or \"..\" components"),
        (vm("v", ""), "no empty"),
        (vm("v", "a//b"), "no empty"),
        (vm("v", "a/"), "no empty"),
        (vm("v", "x") + &vm("v", "y"), "vm \"v\": the name is used twice"),
        (vm("a", "x") + &vm("b", "x"), "vm \"b\": cgroup \"x\" is already vm \"a\"'s"),
        (vm("a", "x/y") + &vm("b", "x"), "vm \"a\": cgroup \"x/y\" is inside vm \"b\"'s cgroup \"x\""),
    ];
    for (vms, want) in cases {
        let e = parse_err(&format!("{HEAD}{vms}"));
        assert!(e.contains(want), "{vms:?}: {e}");
    }
    // "x" and "xy" are siblings, not nested.
    AkitaConfig::parse(&format!("{HEAD}{}{}", vm("a", "x"), vm("b", "xy"))).unwrap();
}

#[test]
fn no_input_makes_the_parser_panic() {
    // Every prefix of the example, and the example with single bytes replaced
    // (a fixed pseudo-random sequence), must give Ok or Err, never a panic.
    for end in 0..EXAMPLE.len() {
        if EXAMPLE.is_char_boundary(end) {
            let _ = AkitaConfig::parse(&EXAMPLE[..end]);
        }
    }
    let mut seed: u64 = 0x2545_f491_4f6c_dd1d;
    let mut next = move || {
        seed ^= seed << 13;
        seed ^= seed >> 7;
        seed ^= seed << 17;
        seed
    };
    let alphabet = b"0123456789-.=\"[]#\n abcHILOxe+";
    for _ in 0..3000 {
        let mut bytes = EXAMPLE.as_bytes().to_vec();
        for _ in 0..3 {
            let at = (next() % bytes.len() as u64) as usize;
            bytes[at] = alphabet[(next() % alphabet.len() as u64) as usize];
        }
        if let Ok(text) = String::from_utf8(bytes) {
            let _ = AkitaConfig::parse(&text);
        }
    }
}
