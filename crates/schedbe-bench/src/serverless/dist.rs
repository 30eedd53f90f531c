//! Small numerical pieces of the model: the standard normal quantile (for
//! stratified sampling of the log-normal fits) and seed derivation.

/// The standard normal quantile Φ⁻¹(p) for p in (0, 1), by Acklam's rational
/// approximation (relative error below 1.2e-9, far finer than the fits it
/// serves). Outside (0, 1) it returns ±infinity or NaN, as the exact function would.
pub fn normal_quantile(p: f64) -> f64 {
    const A: [f64; 6] = [
        -3.969_683_028_665_376e1,
        2.209_460_984_245_205e2,
        -2.759_285_104_469_687e2,
        1.383_577_518_672_69e2,
        -3.066_479_806_614_716e1,
        2.506_628_277_459_239,
    ];
    const B: [f64; 5] = [
        -5.447_609_879_822_406e1,
        1.615_858_368_580_409e2,
        -1.556_989_798_598_866e2,
        6.680_131_188_771_972e1,
        -1.328_068_155_288_572e1,
    ];
    const C: [f64; 6] = [
        -7.784_894_002_430_293e-3,
        -3.223_964_580_411_365e-1,
        -2.400_758_277_161_838,
        -2.549_732_539_343_734,
        4.374_664_141_464_968,
        2.938_163_982_698_783,
    ];
    const D: [f64; 4] = [7.784_695_709_041_462e-3, 3.224_671_290_700_398e-1, 2.445_134_137_142_996, 3.754_408_661_907_416];
    const P_LOW: f64 = 0.02425;
    if p.is_nan() || !(0.0..=1.0).contains(&p) {
        return f64::NAN;
    }
    if p == 0.0 {
        return f64::NEG_INFINITY;
    }
    if p == 1.0 {
        return f64::INFINITY;
    }
    // The tails use q = sqrt(-2 ln p), where a rational function in q stays accurate.
    let tail = |q: f64| {
        (((((C[0] * q + C[1]) * q + C[2]) * q + C[3]) * q + C[4]) * q + C[5])
            / ((((D[0] * q + D[1]) * q + D[2]) * q + D[3]) * q + 1.0)
    };
    if p < P_LOW {
        tail((-2.0 * p.ln()).sqrt())
    } else if p > 1.0 - P_LOW {
        -tail((-2.0 * (1.0 - p).ln()).sqrt())
    } else {
        let q = p - 0.5;
        let r = q * q;
        (((((A[0] * r + A[1]) * r + A[2]) * r + A[3]) * r + A[4]) * r + A[5]) * q
            / (((((B[0] * r + B[1]) * r + B[2]) * r + B[3]) * r + B[4]) * r + 1.0)
    }
}

/// The seed of stream `stream` of a run seeded with `seed`: one splitmix64
/// step over both. Each function draws from its own stream, so adding a
/// function or changing one function's rate leaves every other function's
/// draws as they were (common random numbers across configurations).
pub fn stream_seed(seed: u64, stream: u64) -> u64 {
    let mut z = seed ^ stream.wrapping_add(1).wrapping_mul(0x9E37_79B9_7F4A_7C15);
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    z ^ (z >> 31)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn normal_quantile_known_values() {
        // Table values of the standard normal distribution.
        for (p, z) in [(0.5, 0.0), (0.975, 1.959_963_985), (0.84134474607, 1.0), (0.01, -2.326_347_874), (0.999, 3.090_232_306)] {
            assert!((normal_quantile(p) - z).abs() < 1e-7, "p {p}: {} vs {z}", normal_quantile(p));
        }
        assert!((normal_quantile(0.2) + normal_quantile(0.8)).abs() < 1e-12, "symmetric");
        assert_eq!(normal_quantile(0.0), f64::NEG_INFINITY);
        assert!(normal_quantile(1.5).is_nan() && normal_quantile(f64::NAN).is_nan());
    }

    #[test]
    fn stream_seeds_differ() {
        let s: std::collections::HashSet<u64> = (0..1000).map(|i| stream_seed(7, i)).collect();
        assert_eq!(s.len(), 1000);
        assert_ne!(stream_seed(7, 0), stream_seed(8, 0));
    }
}
