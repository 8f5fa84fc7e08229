//! The quicksort against the CPU's sort: empty, tiny, leaf-sized, random, sorted, reversed and
//! all-equal inputs (the last three push the recursion to its depth limit).

use cuda_rt::{DeviceBuffer, Stream};

fn random(n: usize, seed: u64) -> Vec<u32> {
    let mut keys = vec![0; n];
    cuda_rt_testing::SplitMix64::new(seed).fill_u32(&mut keys);
    keys
}

#[test]
fn sorts_like_the_cpu() {
    let Some(_gpu) = cuda_rt_testing::gpu() else {
        return;
    };
    let stream = Stream::new().unwrap();
    let mut cases: Vec<(String, Vec<u32>)> = Vec::new();
    for n in [0usize, 1, 2, 511, 512, 513, 100_003] {
        cases.push((format!("random {n}"), random(n, n as u64)));
    }
    let n = 200_000;
    cases.push(("sorted".into(), (0..n as u32).collect()));
    cases.push(("reversed".into(), (0..n as u32).rev().collect()));
    cases.push(("all equal".into(), vec![7; n]));
    cases.push((
        "few distinct".into(),
        random(n, 5).iter().map(|x| x % 3).collect(),
    ));
    for (what, input) in cases {
        let mut keys = DeviceBuffer::from_slice(&input).unwrap();
        dp_quicksort::quicksort(&stream, &mut keys).unwrap();
        let mut want = input;
        want.sort_unstable();
        assert!(
            keys.to_vec().unwrap() == want,
            "{what}: not sorted like the CPU"
        );
    }
}
