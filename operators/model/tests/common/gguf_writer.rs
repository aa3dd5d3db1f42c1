//! A minimal GGUF writer for the tests that build files by hand.

/// A GGUF v3 file under construction (llama.cpp's `docs/gguf.md` layout, alignment 32).
#[derive(Default)]
pub struct Writer {
    pub kv: Vec<u8>,
    kv_count: u64,
    infos: Vec<u8>,
    tensor_count: u64,
    data: Vec<u8>,
}

fn string(out: &mut Vec<u8>, s: &str) {
    out.extend((s.len() as u64).to_le_bytes());
    out.extend(s.as_bytes());
}

impl Writer {
    pub fn key(&mut self, key: &str, value_type: u32) {
        string(&mut self.kv, key);
        self.kv.extend(value_type.to_le_bytes());
        self.kv_count += 1;
    }
    pub fn u32(&mut self, key: &str, v: u32) {
        self.key(key, 4);
        self.kv.extend(v.to_le_bytes());
    }
    pub fn f32(&mut self, key: &str, v: f32) {
        self.key(key, 6);
        self.kv.extend(v.to_le_bytes());
    }
    pub fn str(&mut self, key: &str, v: &str) {
        self.key(key, 8);
        string(&mut self.kv, v);
    }
    pub fn f32s(&mut self, key: &str, items: &[f32]) {
        self.key(key, 9);
        self.kv.extend(6u32.to_le_bytes());
        self.kv.extend((items.len() as u64).to_le_bytes());
        for item in items {
            self.kv.extend(item.to_le_bytes());
        }
    }
    pub fn strings(&mut self, key: &str, items: &[&str]) {
        self.key(key, 9);
        self.kv.extend(8u32.to_le_bytes());
        self.kv.extend((items.len() as u64).to_le_bytes());
        for item in items {
            string(&mut self.kv, item);
        }
    }
    /// An F32 tensor of `shape` (row-major) filled with small distinct values.
    pub fn tensor(&mut self, name: &str, shape: &[usize]) {
        let n: usize = shape.iter().product();
        let bytes: Vec<u8> = (0..n)
            .flat_map(|i| (0.01 * ((i % 7) as f32 - 3.0)).to_le_bytes())
            .collect();
        self.raw_tensor(name, shape, 0, &bytes);
    }
    pub fn raw_tensor(&mut self, name: &str, shape: &[usize], ggml_type: u32, bytes: &[u8]) {
        string(&mut self.infos, name);
        self.infos.extend((shape.len() as u32).to_le_bytes());
        for &d in shape.iter().rev() {
            self.infos.extend((d as u64).to_le_bytes());
        }
        self.infos.extend(ggml_type.to_le_bytes());
        self.infos.extend((self.data.len() as u64).to_le_bytes());
        self.data.extend(bytes);
        self.data.resize(self.data.len().div_ceil(32) * 32, 0);
        self.tensor_count += 1;
    }
    pub fn finish(&self) -> Vec<u8> {
        let mut out = b"GGUF".to_vec();
        out.extend(3u32.to_le_bytes());
        out.extend(self.tensor_count.to_le_bytes());
        out.extend(self.kv_count.to_le_bytes());
        out.extend(&self.kv);
        out.extend(&self.infos);
        out.resize(out.len().div_ceil(32) * 32, 0);
        out.extend(&self.data);
        out
    }
}
