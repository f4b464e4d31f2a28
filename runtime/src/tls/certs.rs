//! Certificates for TLS listeners and clients (`corum certs`, tests): a certificate authority
//! and the certificates it signs, in PEM, with subject alternative names. Keys are ECDSA P-256.

use std::time::{Duration, SystemTime};

use rcgen::{
    BasicConstraints, CertificateParams, DistinguishedName, DnType, ExtendedKeyUsagePurpose, IsCa,
    Issuer, KeyPair, KeyUsagePurpose,
};

use super::{tls_err, TlsError};

/// When a certificate is valid.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Validity {
    pub not_before: SystemTime,
    pub not_after: SystemTime,
}

impl Validity {
    /// From an hour ago (clocks differ a little) for `days` days.
    pub fn days(days: u32) -> Validity {
        let now = SystemTime::now();
        Validity {
            not_before: now - Duration::from_secs(3600),
            not_after: now + Duration::from_secs(u64::from(days) * 86_400),
        }
    }
}

/// A certificate and its private key, PEM.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Issued {
    pub cert_pem: String,
    pub key_pem: String,
}

impl Issued {
    /// The key then the certificate: one file for `ssl.keystore.location`.
    pub fn keystore_pem(&self) -> String {
        format!("{}{}", self.key_pem, self.cert_pem)
    }
}

/// What a certificate says about its subject.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Subject {
    pub common_name: String,
    /// `O=`, when set.
    pub organization: Option<String>,
    /// Subject alternative names: each an IP address or a DNS name.
    pub alt_names: Vec<String>,
}

fn params(subject: &Subject, validity: Validity) -> Result<CertificateParams, TlsError> {
    let mut p = CertificateParams::new(subject.alt_names.clone())
        .map_err(|e| tls_err("subject alternative names", e))?;
    let mut dn = DistinguishedName::new();
    if let Some(o) = &subject.organization {
        dn.push(DnType::OrganizationName, o.as_str());
    }
    dn.push(DnType::CommonName, subject.common_name.as_str());
    p.distinguished_name = dn;
    p.not_before = validity.not_before.into();
    p.not_after = validity.not_after.into();
    Ok(p)
}

/// A certificate authority that signs node and client certificates.
pub struct CertificateAuthority {
    issued: Issued,
    issuer: Issuer<'static, KeyPair>,
}

impl std::fmt::Debug for CertificateAuthority {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("CertificateAuthority")
            .finish_non_exhaustive()
    }
}

impl CertificateAuthority {
    /// A new self-signed CA named `common_name`.
    pub fn new(common_name: &str, validity: Validity) -> Result<CertificateAuthority, TlsError> {
        let mut p = params(
            &Subject {
                common_name: common_name.to_owned(),
                organization: None,
                alt_names: Vec::new(),
            },
            validity,
        )?;
        p.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
        p.key_usages = vec![
            KeyUsagePurpose::KeyCertSign,
            KeyUsagePurpose::CrlSign,
            KeyUsagePurpose::DigitalSignature,
        ];
        let key = KeyPair::generate().map_err(|e| tls_err("CA key", e))?;
        let cert = p
            .self_signed(&key)
            .map_err(|e| tls_err("CA certificate", e))?;
        let issued = Issued {
            cert_pem: cert.pem(),
            key_pem: key.serialize_pem(),
        };
        Ok(CertificateAuthority {
            issued,
            issuer: Issuer::new(p, key),
        })
    }

    /// A CA from its certificate and key (files `corum certs ca` wrote).
    pub fn load(cert_pem: &str, key_pem: &str) -> Result<CertificateAuthority, TlsError> {
        let key = KeyPair::from_pem(key_pem).map_err(|e| tls_err("CA key", e))?;
        let issuer =
            Issuer::from_ca_cert_pem(cert_pem, key).map_err(|e| tls_err("CA certificate", e))?;
        let key_pem = issuer.key().serialize_pem();
        Ok(CertificateAuthority {
            issued: Issued {
                cert_pem: cert_pem.to_owned(),
                key_pem,
            },
            issuer,
        })
    }

    /// The CA's certificate and key.
    pub fn issued(&self) -> &Issued {
        &self.issued
    }

    /// Signs a certificate for `subject`, usable both as a server's and as a client's (a
    /// controller is both).
    pub fn issue(&self, subject: &Subject, validity: Validity) -> Result<Issued, TlsError> {
        let mut p = params(subject, validity)?;
        p.is_ca = IsCa::ExplicitNoCa;
        p.key_usages = vec![
            KeyUsagePurpose::DigitalSignature,
            KeyUsagePurpose::KeyEncipherment,
        ];
        p.extended_key_usages = vec![
            ExtendedKeyUsagePurpose::ServerAuth,
            ExtendedKeyUsagePurpose::ClientAuth,
        ];
        p.use_authority_key_identifier_extension = true;
        let key = KeyPair::generate().map_err(|e| tls_err("key", e))?;
        let cert = p
            .signed_by(&key, &self.issuer)
            .map_err(|e| tls_err("certificate", e))?;
        Ok(Issued {
            cert_pem: cert.pem(),
            key_pem: key.serialize_pem(),
        })
    }
}
