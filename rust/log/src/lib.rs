pub fn hello() -> u32 { crc32c::crc32c(b"123456789") }
