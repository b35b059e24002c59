#[test]
fn timing() {
    let s = specbridge_engine::pipeline::pipeline_schema();
    let t = std::time::Instant::now();
    for _ in 0..500 {
        let v = jsonschema::options()
            .with_draft(jsonschema::Draft::Draft7)
            .build(&s)
            .unwrap();
        std::hint::black_box(v);
    }
    println!("compile {:?}", t.elapsed() / 500);
}
