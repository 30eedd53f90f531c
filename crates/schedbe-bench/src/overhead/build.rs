//! The fork/exec-heavy workload: a small C project generated at run time
//! (N units + main + Makefile), built with `make -j<cpus>`; every compile
//! is a fork and a few execs (driver, cc1, as). The built program prints a
//! checksum the generator knows, so a broken build cannot pass as fast.

use std::path::Path;
use std::process::Command;

use anyhow::{bail, Context, Result};

const MAKEFILE: &str = "\
CC ?= cc
CFLAGS ?= -O2 -Wall
OBJS := $(patsubst %.c,%.o,$(sort $(wildcard unit_*.c))) main.o

prog: $(OBJS)
\t$(CC) -o $@ $(OBJS)

%.o: %.c common.h
\t$(CC) $(CFLAGS) -c -o $@ $<

clean:
\trm -f prog *.o

.PHONY: clean
";

/// What unit_K() returns (the C below, computed here).
fn unit_value(k: usize) -> i64 {
    // s = sum over i < 16 of (k*i + k) = 136k; plus strlen("unit<k>")
    (136 * k as i64) % 1000 + format!("unit{k}").len() as i64
}

/// The checksum `prog` prints for @n units.
pub fn expected_sum(n: usize) -> i64 {
    (0..n).map(unit_value).sum()
}

fn unit_source(k: usize) -> String {
    format!(
        "#include <stdio.h>\n#include <string.h>\n#include \"common.h\"\n\n\
         struct rec_{k} {{ long a[16]; char name[32]; }};\n\n\
         static int fill_{k}(struct rec_{k} *r, long seed)\n{{\n\
         \tfor (int i = 0; i < 16; i++)\n\t\tr->a[i] = seed * i + {k};\n\
         \tsnprintf(r->name, sizeof r->name, \"unit%ld\", seed);\n\
         \treturn (int)strlen(r->name);\n}}\n\n\
         long unit_{k}(void)\n{{\n\tstruct rec_{k} r;\n\tint n = fill_{k}(&r, {k});\n\tlong s = 0;\n\
         \tfor (int i = 0; i < 16; i++)\n\t\ts += r.a[i];\n\treturn s % 1000 + n;\n}}\n"
    )
}

/// Write the project for @n units into @dir (created; old files replaced).
pub fn generate(dir: &Path, n: usize) -> Result<()> {
    if n == 0 {
        bail!("the build needs at least one unit");
    }
    std::fs::create_dir_all(dir).with_context(|| format!("create {}", dir.display()))?;
    let w = |name: &str, text: &str| std::fs::write(dir.join(name), text).with_context(|| format!("write {}/{name}", dir.display()));
    w("Makefile", MAKEFILE)?;
    let protos: String = (0..n).map(|k| format!("long unit_{k}(void);\n")).collect();
    w("common.h", &format!("#ifndef COMMON_H\n#define COMMON_H\n{protos}#endif\n"))?;
    let calls: String = (0..n).map(|k| format!("\tsum += unit_{k}();\n")).collect();
    w("main.c", &format!("#include <stdio.h>\n#include \"common.h\"\n\nint main(void)\n{{\n\tlong sum = 0;\n{calls}\tprintf(\"sum %ld\\n\", sum);\n\treturn 0;\n}}\n"))?;
    for k in 0..n {
        w(&format!("unit_{k}.c"), &unit_source(k))?;
    }
    Ok(())
}

/// The C compiler: @explicit, else gcc, else clang-19, else cc.
pub fn find_cc(explicit: Option<&str>) -> Result<String> {
    if let Some(c) = explicit {
        return Ok(c.to_string());
    }
    for c in ["gcc", "clang-19", "clang", "cc"] {
        if Command::new(c).arg("--version").output().map(|o| o.status.success()).unwrap_or(false) {
            return Ok(c.to_string());
        }
    }
    bail!("no C compiler found (gcc, clang-19, clang, cc); give --build-cc")
}

/// Run the built program and check its checksum.
pub fn check(dir: &Path, n: usize) -> Result<()> {
    let out = Command::new(dir.join("prog")).output().with_context(|| format!("run {}/prog", dir.display()))?;
    let text = String::from_utf8_lossy(&out.stdout);
    let want = format!("sum {}", expected_sum(n));
    if !out.status.success() || text.trim() != want {
        bail!("the built program printed {:?} (status {}), expected {want:?}", text.trim(), out.status);
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn checksum_formula() {
        // unit_0: s = 0, "unit0" -> 5; unit_7: 952 + 5; unit_10: 1360 % 1000 + 6
        assert_eq!(unit_value(0), 5);
        assert_eq!(unit_value(7), 957);
        assert_eq!(unit_value(10), 366);
        assert_eq!(expected_sum(1), 5);
    }

    /// Generates, builds (when a compiler and make exist) and checks a tiny project.
    #[test]
    fn builds_and_checks() {
        let d = std::env::temp_dir().join(format!("schedbe-build-test-{}", std::process::id()));
        generate(&d, 12).unwrap();
        assert!(d.join("unit_11.c").is_file() && d.join("Makefile").is_file());
        let (Ok(cc), true) = (find_cc(None), Command::new("make").arg("--version").output().is_ok()) else {
            std::fs::remove_dir_all(&d).unwrap();
            return;
        };
        let st = Command::new("make").arg("-C").arg(&d).arg("-s").arg("-j2").arg(format!("CC={cc}")).status().unwrap();
        assert!(st.success());
        check(&d, 12).unwrap();
        assert!(check(&d, 13).is_err());
        std::fs::remove_dir_all(&d).unwrap();
        assert!(generate(&d, 0).is_err());
    }
}
