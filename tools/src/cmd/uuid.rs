//! `corum random-uuid`: a fresh version-4 UUID in Kafka's text form.

use std::io::Read;

use anyhow::Context;
use corum_types::Uuid;

#[derive(clap::Args, Debug)]
pub struct Args {}

pub fn run(_args: Args) -> anyhow::Result<()> {
    println!("{}", random_uuid()?);
    Ok(())
}

/// 128 bits from the kernel's CSPRNG. Never all-zero: that value means "none".
pub fn random_uuid() -> anyhow::Result<Uuid> {
    loop {
        let mut buf = [0u8; 16];
        std::fs::File::open("/dev/urandom")
            .and_then(|mut f| f.read_exact(&mut buf))
            .context("reading /dev/urandom")?;
        let u = Uuid::from_random_bits(u128::from_be_bytes(buf));
        if !u.is_zero() {
            return Ok(u);
        }
    }
}
