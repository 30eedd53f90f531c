//! `akita check`'s report, text and JSON, on the example and on refusals.

use super::super::check::{build, render};
use super::super::config::AkitaConfig;
use super::EXAMPLE;

#[test]
fn the_example_admits_all_four_on_cpu_0() {
    let r = build(&AkitaConfig::parse(EXAMPLE).unwrap());
    assert_eq!(r.used.len(), 1);
    assert_eq!(r.idle_cpus, [1, 2, 3]);
    assert_eq!(r.admitted, ["memcached", "lookbusy-1", "lookbusy-2", "lookbusy-3"]);
    assert!(r.refused.is_empty() && r.deferred.is_empty());
    let text = render(&r, "vms.toml");
    // U1(1) = 0.75, U2(1) = 0.05, U2(2) = 0.25, x = 0.2, value = 0.4
    assert!(text.contains("  0  0.7500  0.0500  0.2500  0.2000  0.4000"), "{text}");
    assert!(text.contains("memcached/0 (HI, pinned), lookbusy-1/0 (LO)"), "{text}");
    assert!(text.contains("idle CPUs: 1-3\nadmitted: 4 of 4 VMs"), "{text}");
}

#[test]
fn json_has_the_same_numbers() {
    let r = build(&AkitaConfig::parse(EXAMPLE).unwrap());
    let j = serde_json::to_value(&r).unwrap();
    let cpu0 = &j["used"][0];
    assert_eq!(cpu0["cpu"], 0);
    assert_eq!(cpu0["u1_1"], 0.75);
    assert_eq!(cpu0["verdict"], "fits");
    assert!((cpu0["x"].as_f64().unwrap() - 0.2).abs() < 1e-12, "{cpu0}");
    assert!((cpu0["value"].as_f64().unwrap() - 0.4).abs() < 1e-12, "{cpu0}");
    assert_eq!(cpu0["vcpus"][0]["criticality"], "HI");
    assert_eq!(cpu0["vcpus"][0]["pinned"], true);
    assert_eq!(j["idle_cpus"], serde_json::json!([1, 2, 3]));
    assert_eq!(j["refused"], serde_json::json!([]));
}

#[test]
fn refused_and_deferred_vms_are_reported() {
    // One CPU: memcached + 3x type 2 fit, the fourth type 2 does not
    // (U1(1)+U2(1) = 1.05); "t" has vcpus = "threads" and is left to runtime.
    let extra = "[[vm]]\nname = \"lookbusy-4\"\ncgroup = \"akita/lookbusy-4\"\ncriticality = \"LO\"\ntype = 2\nvcpus = 1\n\
                 [[vm]]\nname = \"t\"\ncgroup = \"akita/t\"\ncriticality = \"LO\"\ntype = 5\nvcpus = \"threads\"\n";
    let text = EXAMPLE.replace("cpus = \"0-3\"", "cpus = \"0\"") + extra;
    let r = build(&AkitaConfig::parse(&text).unwrap());
    assert_eq!(r.admitted.len(), 4);
    assert_eq!(r.deferred, ["t"]);
    assert_eq!(r.refused.len(), 1);
    assert_eq!(r.refused[0].vm, "lookbusy-4");
    assert_eq!(r.refused[0].tried.len(), 1);
    let out = render(&r, "f");
    assert!(out.contains("idle CPUs: none\nadmitted: 4 of 5 VMs"), "{out}");
    assert!(out.contains("not checked: vm \"t\" has vcpus = \"threads\""), "{out}");
    assert!(out.contains("vm \"lookbusy-4\" refused: its vCPU 0 (of 1) fits on no CPU in 0"), "{out}");
    let j = serde_json::to_value(&r).unwrap();
    assert_eq!(j["refused"][0]["tried"][0]["x"], serde_json::Value::Null);
    assert_eq!(j["refused"][0]["tried"][0]["verdict"], "lo_mode_overload");
}
