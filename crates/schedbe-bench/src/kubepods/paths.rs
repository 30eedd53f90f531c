//! Cgroup names as kubelet (systemd and cgroupfs drivers) and containerd
//! make them.

use std::path::PathBuf;

use super::spec::{Driver, Qos};

pub fn kubepods_path(driver: Driver) -> PathBuf {
    PathBuf::from(match driver {
        Driver::Systemd => "kubepods.slice",
        Driver::Cgroupfs => "kubepods",
    })
}

/// The QoS-level cgroup: kubepods itself for Guaranteed.
pub fn qos_path(driver: Driver, qos: Qos) -> PathBuf {
    let kp = kubepods_path(driver);
    match (driver, qos) {
        (_, Qos::Guaranteed) => kp,
        (Driver::Systemd, Qos::Burstable) => kp.join("kubepods-burstable.slice"),
        (Driver::Systemd, Qos::BestEffort) => kp.join("kubepods-besteffort.slice"),
        (Driver::Cgroupfs, Qos::Burstable) => kp.join("burstable"),
        (Driver::Cgroupfs, Qos::BestEffort) => kp.join("besteffort"),
    }
}

pub fn pod_path(driver: Driver, qos: Qos, uid: &str) -> PathBuf {
    let leaf = match driver {
        Driver::Cgroupfs => format!("pod{uid}"),
        Driver::Systemd => {
            let prefix = match qos {
                Qos::Guaranteed => "kubepods",
                Qos::Burstable => "kubepods-burstable",
                Qos::BestEffort => "kubepods-besteffort",
            };
            format!("{prefix}-pod{}.slice", uid.replace('-', "_"))
        }
    };
    qos_path(driver, qos).join(leaf)
}

pub fn container_path(driver: Driver, qos: Qos, uid: &str, container_id: &str) -> PathBuf {
    let leaf = match driver {
        Driver::Cgroupfs => container_id.to_string(),
        Driver::Systemd => format!("cri-containerd-{container_id}.scope"),
    };
    pod_path(driver, qos, uid).join(leaf)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::path::Path;

    #[test]
    fn kubepods_paths() {
        let uid = "0f1e2d3c-aaaa-4bbb-8ccc-000011112222";
        let id = "abc123";
        let s = Driver::Systemd;
        let f = Driver::Cgroupfs;
        assert_eq!(
            container_path(s, Qos::Burstable, uid, id),
            Path::new("kubepods.slice/kubepods-burstable.slice/kubepods-burstable-pod0f1e2d3c_aaaa_4bbb_8ccc_000011112222.slice/cri-containerd-abc123.scope")
        );
        assert_eq!(
            container_path(s, Qos::Guaranteed, uid, id),
            Path::new(
                "kubepods.slice/kubepods-pod0f1e2d3c_aaaa_4bbb_8ccc_000011112222.slice/cri-containerd-abc123.scope"
            )
        );
        assert_eq!(
            container_path(s, Qos::BestEffort, uid, id),
            Path::new("kubepods.slice/kubepods-besteffort.slice/kubepods-besteffort-pod0f1e2d3c_aaaa_4bbb_8ccc_000011112222.slice/cri-containerd-abc123.scope")
        );
        assert_eq!(
            container_path(f, Qos::Burstable, uid, id),
            Path::new("kubepods/burstable/pod0f1e2d3c-aaaa-4bbb-8ccc-000011112222/abc123")
        );
        assert_eq!(
            container_path(f, Qos::Guaranteed, uid, id),
            Path::new("kubepods/pod0f1e2d3c-aaaa-4bbb-8ccc-000011112222/abc123")
        );
        assert_eq!(
            container_path(f, Qos::BestEffort, uid, id),
            Path::new("kubepods/besteffort/pod0f1e2d3c-aaaa-4bbb-8ccc-000011112222/abc123")
        );
    }
}
