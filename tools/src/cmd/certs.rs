//! `corum certs`: a certificate authority and the certificates it signs, in PEM, for TLS
//! listeners (`ssl.keystore.location`, `ssl.truststore.location`) and clients
//! (`--command-config`, Kafka's clients). For a test cluster or a first setup; an
//! organisation's own CA works the same way (any PEM key and chain).
//!
//! - `corum certs ca --dir DIR`: `DIR/ca.pem` (the CA certificate: every node's and client's
//!   truststore) and `DIR/ca-key.pem` (its private key: keep it off the nodes).
//! - `corum certs issue --dir DIR --common-name NAME --san HOST,...`: `DIR/NAME.pem`, a private
//!   key and its certificate signed by the CA in `DIR` (a keystore). A controller's
//!   certificate must name it `controller-<node id>` (its common name, or a DNS SAN) and carry
//!   the addresses the other controllers dial (IP or DNS SANs); a client's principal is
//!   `User:CN=NAME` (with `,O=...` when `--organization` is given).

use std::path::{Path, PathBuf};

use anyhow::Context;
use corum_runtime::tls::certs::{CertificateAuthority, Subject, Validity};

#[derive(clap::Args, Debug)]
pub struct Args {
    #[command(subcommand)]
    pub what: What,
}

#[derive(clap::Subcommand, Debug)]
pub enum What {
    /// Create a CA: DIR/ca.pem (the truststore) and DIR/ca-key.pem.
    Ca(CaArgs),
    /// Sign a certificate with the CA in DIR: DIR/<common name>.pem (key and certificate).
    Issue(IssueArgs),
}

#[derive(clap::Args, Debug)]
pub struct CaArgs {
    #[arg(long)]
    pub dir: PathBuf,
    #[arg(long, default_value = "corum CA")]
    pub common_name: String,
    #[arg(long, default_value_t = 365)]
    pub days: u32,
}

#[derive(clap::Args, Debug)]
pub struct IssueArgs {
    /// The directory of the CA (`corum certs ca --dir`).
    #[arg(long)]
    pub dir: PathBuf,
    /// The subject's common name: `controller-<node id>` for a controller.
    #[arg(long)]
    pub common_name: String,
    /// The subject's organization (`O=`), part of the principal.
    #[arg(long)]
    pub organization: Option<String>,
    /// Subject alternative names: IP addresses and DNS names the certificate is valid for.
    #[arg(long, value_delimiter = ',')]
    pub san: Vec<String>,
    #[arg(long, default_value_t = 365)]
    pub days: u32,
    /// Where to write the key and certificate (default DIR/<common name>.pem).
    #[arg(long)]
    pub out: Option<PathBuf>,
}

pub fn run(args: Args) -> anyhow::Result<()> {
    match args.what {
        What::Ca(a) => {
            std::fs::create_dir_all(&a.dir)
                .with_context(|| format!("creating {}", a.dir.display()))?;
            let ca = CertificateAuthority::new(&a.common_name, Validity::days(a.days))?;
            write(&a.dir.join("ca.pem"), &ca.issued().cert_pem, false)?;
            write(&a.dir.join("ca-key.pem"), &ca.issued().key_pem, true)?;
            println!(
                "{}: the CA certificate (truststore)\n{}: its key",
                a.dir.join("ca.pem").display(),
                a.dir.join("ca-key.pem").display()
            );
        }
        What::Issue(a) => {
            let read = |name: &str| {
                let p = a.dir.join(name);
                std::fs::read_to_string(&p).with_context(|| format!("reading {}", p.display()))
            };
            let ca = CertificateAuthority::load(&read("ca.pem")?, &read("ca-key.pem")?)?;
            anyhow::ensure!(
                !a.common_name.is_empty()
                    && !a.common_name.contains(['/', '\\'])
                    && a.common_name != "."
                    && a.common_name != "..",
                "--common-name {:?}: must be non-empty, without '/'",
                a.common_name
            );
            let issued = ca.issue(
                &Subject {
                    common_name: a.common_name.clone(),
                    organization: a.organization.clone(),
                    alt_names: a.san.clone(),
                },
                Validity::days(a.days),
            )?;
            let out = a
                .out
                .clone()
                .unwrap_or_else(|| a.dir.join(format!("{}.pem", a.common_name)));
            write(&out, &issued.keystore_pem(), true)?;
            println!("{}: key and certificate (keystore)", out.display());
        }
    }
    Ok(())
}

/// Writes `text` to `path`; a private key readable by its owner only.
fn write(path: &Path, text: &str, private: bool) -> anyhow::Result<()> {
    use std::io::Write;
    use std::os::unix::fs::OpenOptionsExt;
    let mut f = std::fs::OpenOptions::new()
        .write(true)
        .create(true)
        .truncate(true)
        .mode(if private { 0o600 } else { 0o644 })
        .open(path)
        .with_context(|| format!("writing {}", path.display()))?;
    f.write_all(text.as_bytes())
        .with_context(|| format!("writing {}", path.display()))
}
