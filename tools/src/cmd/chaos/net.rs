//! The network of `corum chaos`: a bridge on the host, and per node a network namespace with
//! a veth pair (`eth0` inside, on the bridge outside) and an address of its own in a /24; the
//! host reaches the nodes through the bridge's address. Faults are nftables rules in a node's
//! namespace (a table `corum_chaos` with an input and an output chain), so a rule cuts what
//! that node sends or receives and nothing else. Everything is made with `ip` and `nft` and
//! removed by [`ChaosNet::remove`] (also on drop); the names carry the run's tag (its pid
//! modulo [`TAG_MODULUS`]), by which [`super::sweep`] finds a killed run's.
//!
//! The kernel here has no `netem` (`CONFIG_NET_SCH_NETEM` is not set), so delay, loss and
//! reordering are a user-space worker's ([`super::packet_queue`]): `iptables` rules
//! ([`ChaosNet::queue_packets`]) send a node's `eth0` packets to a netfilter queue
//! (NFQUEUE, which nftables here has only through `iptables`' xtables target), with
//! `--queue-bypass` so that they pass while no worker is bound.

use std::net::Ipv4Addr;
use std::path::PathBuf;
use std::process::{Command, Stdio};

use anyhow::Context;

use super::disk::run;

/// What a node's namespace drops.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Rule {
    /// Packets from this address.
    DropFrom(Ipv4Addr),
    /// Packets to this address.
    DropTo(Ipv4Addr),
    /// Everything on `eth0`, both ways (the node is cut off from everyone).
    Isolate,
}

impl Rule {
    /// The nftables rule: (chain, statement).
    fn nft(&self) -> Vec<(&'static str, String)> {
        match self {
            Rule::DropFrom(a) => vec![("input", format!("ip saddr {a} drop"))],
            Rule::DropTo(a) => vec![("output", format!("ip daddr {a} drop"))],
            Rule::Isolate => vec![
                ("input", "iifname \"eth0\" drop".into()),
                ("output", "oifname \"eth0\" drop".into()),
            ],
        }
    }
}

/// A run's names carry its process id modulo this ("tag"), so that the longest, a veth end
/// `cc<tag>v<i>`, stays within the kernel's 15 bytes of an interface name.
pub const TAG_MODULUS: u32 = 100_000;

/// The bridge of the run tagged `tag` (on the host).
pub fn bridge_name(tag: u32) -> String {
    format!("cc{tag}br")
}

/// Node `i`'s network namespace in the run tagged `tag`.
pub fn namespace_name(tag: u32, i: u32) -> String {
    format!("cc{tag}n{i}")
}

/// The host end of node `i`'s veth pair in the run tagged `tag` (the other end, `cc<tag>p<i>`
/// until it is renamed `eth0`, lives in the namespace).
pub fn veth_name(tag: u32, i: u32) -> String {
    format!("cc{tag}v{i}")
}

/// The bridge, the namespaces and their links (see the module doc).
pub struct ChaosNet {
    tag: u32,
    subnet: [u8; 3],
    nodes: u32,
    bridge: bool,
    namespaces: Vec<String>,
}

/// The `iptables-restore` input that sends a namespace's `eth0` packets (only those to and
/// from `peer` when given) to netfilter queue `queue`, both ways; `None`: no rule. It replaces
/// the namespace's whole `filter` table (the namespace is the run's own), in one transaction.
pub fn queue_rules(queue: Option<(u16, Option<Ipv4Addr>)>) -> String {
    let mut script = String::from("*filter\n:INPUT ACCEPT [0:0]\n:OUTPUT ACCEPT [0:0]\n");
    if let Some((num, peer)) = queue {
        let (from, to) = match peer {
            Some(p) => (format!(" -s {p}"), format!(" -d {p}")),
            None => (String::new(), String::new()),
        };
        let target = format!("-j NFQUEUE --queue-num {num} --queue-bypass");
        script.push_str(&format!("-A INPUT -i eth0{from} {target}\n"));
        script.push_str(&format!("-A OUTPUT -o eth0{to} {target}\n"));
    }
    script.push_str("COMMIT\n");
    script
}

/// Loads `script` with `iptables-restore` in the namespace `ns`.
pub fn iptables_restore(ns: &str, script: &str) -> anyhow::Result<()> {
    let mut child = Command::new("ip")
        .args(["netns", "exec", ns, "iptables-restore", "-w", "5"])
        .stdin(Stdio::piped())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .context("running iptables-restore")?;
    {
        use std::io::Write;
        let mut stdin = child.stdin.take().expect("piped");
        stdin
            .write_all(script.as_bytes())
            .context("writing iptables-restore's input")?;
    }
    let out = child
        .wait_with_output()
        .context("waiting for iptables-restore")?;
    anyhow::ensure!(
        out.status.success(),
        "iptables-restore in {ns} failed ({}): {}\ninput:\n{script}",
        out.status,
        String::from_utf8_lossy(&out.stderr).trim()
    );
    Ok(())
}

/// Checks what `corum chaos` needs of the host: root, `ip`, `nft` and `iptables-restore`.
pub fn check_host() -> anyhow::Result<()> {
    // SAFETY: geteuid has no preconditions.
    let euid = unsafe { libc::geteuid() };
    anyhow::ensure!(
        euid == 0,
        "corum chaos needs root: it creates network namespaces, veth pairs, a bridge and \
         nftables rules (run it with sudo)"
    );
    for (tool, package) in [
        ("ip", "iproute2"),
        ("nft", "nftables"),
        ("iptables-restore", "iptables"),
    ] {
        let found = Command::new(tool)
            .arg("--version")
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .status()
            .is_ok();
        anyhow::ensure!(
            found,
            "corum chaos needs `{tool}` on the PATH (Debian: apt-get install {package})"
        );
    }
    Ok(())
}

impl ChaosNet {
    /// Creates the network of `nodes` nodes, named after `tag` (the process id: two runs at
    /// once do not collide).
    pub fn create(nodes: u32, tag: u32) -> anyhow::Result<ChaosNet> {
        anyhow::ensure!((1..=9).contains(&nodes), "1 to 9 nodes");
        let t = tag % TAG_MODULUS;
        let mut net = ChaosNet {
            tag: t,
            subnet: [10, 200 + (t % 50) as u8, (t / 50 % 250) as u8],
            nodes,
            bridge: false,
            namespaces: Vec::new(),
        };
        net.build().inspect_err(|_| net.remove())?;
        Ok(net)
    }

    fn build(&mut self) -> anyhow::Result<()> {
        let br = bridge_name(self.tag);
        run("ip", &["link", "add", &br, "type", "bridge"])?;
        self.bridge = true;
        let host = format!("{}/24", self.host_addr());
        run("ip", &["addr", "add", &host, "dev", &br])?;
        run("ip", &["link", "set", &br, "up"])?;
        for i in 1..=self.nodes {
            let ns = namespace_name(self.tag, i);
            run("ip", &["netns", "add", &ns])?;
            self.namespaces.push(ns.clone());
            let (outside, inside) = (veth_name(self.tag, i), format!("cc{}p{i}", self.tag));
            run(
                "ip",
                &[
                    "link", "add", &outside, "type", "veth", "peer", "name", &inside,
                ],
            )?;
            run("ip", &["link", "set", &inside, "netns", &ns])?;
            run("ip", &["link", "set", &outside, "master", &br])?;
            run("ip", &["link", "set", &outside, "up"])?;
            run("ip", &["-n", &ns, "link", "set", "lo", "up"])?;
            run("ip", &["-n", &ns, "link", "set", &inside, "name", "eth0"])?;
            let addr = format!("{}/24", self.addr(i));
            run("ip", &["-n", &ns, "addr", "add", &addr, "dev", "eth0"])?;
            run("ip", &["-n", &ns, "link", "set", "eth0", "up"])?;
            self.nft(
                i,
                "add table inet corum_chaos\n\
                 add chain inet corum_chaos input { type filter hook input priority 0; policy accept; }\n\
                 add chain inet corum_chaos output { type filter hook output priority 0; policy accept; }\n",
            )?;
        }
        Ok(())
    }

    /// Node `i`'s address (1-based).
    pub fn addr(&self, i: u32) -> Ipv4Addr {
        let [a, b, c] = self.subnet;
        Ipv4Addr::new(a, b, c, u8::try_from(i).expect("at most 9 nodes"))
    }

    /// The host's address on the bridge.
    pub fn host_addr(&self) -> Ipv4Addr {
        let [a, b, c] = self.subnet;
        Ipv4Addr::new(a, b, c, 254)
    }

    /// The file of node `i`'s namespace (to enter it before exec).
    pub fn netns_path(&self, i: u32) -> PathBuf {
        PathBuf::from(format!("/run/netns/{}", namespace_name(self.tag, i)))
    }

    fn nft(&self, i: u32, script: &str) -> anyhow::Result<()> {
        let ns = namespace_name(self.tag, i);
        let mut child = Command::new("ip")
            .args(["netns", "exec", &ns, "nft", "-f", "-"])
            .stdin(Stdio::piped())
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .context("running nft")?;
        {
            use std::io::Write;
            let mut stdin = child.stdin.take().expect("piped");
            stdin
                .write_all(script.as_bytes())
                .context("writing nft's script")?;
        }
        let out = child.wait_with_output().context("waiting for nft")?;
        anyhow::ensure!(
            out.status.success(),
            "nft in {ns} failed ({}): {}\nscript:\n{script}",
            out.status,
            String::from_utf8_lossy(&out.stderr).trim()
        );
        Ok(())
    }

    /// Replaces node `i`'s rules with `rules` (none: it is healed).
    pub fn set_rules(&self, i: u32, rules: &[Rule]) -> anyhow::Result<()> {
        let mut script = String::from(
            "flush chain inet corum_chaos input\nflush chain inet corum_chaos output\n",
        );
        for rule in rules {
            for (chain, statement) in rule.nft() {
                script.push_str(&format!("add rule inet corum_chaos {chain} {statement}\n"));
            }
        }
        self.nft(i, &script)
    }

    /// Node `i`'s namespace's name.
    pub fn netns_name(&self, i: u32) -> String {
        namespace_name(self.tag, i)
    }

    /// Sends node `i`'s `eth0` packets (only those to and from `peer` when given) to its
    /// netfilter queue [`super::packet_queue::QUEUE_NUM`], both ways.
    pub fn queue_packets(&self, i: u32, peer: Option<Ipv4Addr>) -> anyhow::Result<()> {
        iptables_restore(
            &self.netns_name(i),
            &queue_rules(Some((super::packet_queue::QUEUE_NUM, peer))),
        )
    }

    /// Removes node `i`'s queueing rules.
    pub fn unqueue_packets(&self, i: u32) -> anyhow::Result<()> {
        iptables_restore(&self.netns_name(i), &queue_rules(None))
    }

    /// Removes every rule of every node.
    pub fn heal(&self) -> anyhow::Result<()> {
        for i in 1..=self.nodes {
            self.set_rules(i, &[])?;
        }
        Ok(())
    }

    /// Deletes the veth pairs, the namespaces and the bridge; errors are ignored (what was
    /// never made is not there).
    pub fn remove(&mut self) {
        for args in self.cleanup_commands() {
            let args: Vec<&str> = args.iter().map(String::as_str).collect();
            let _ = run("ip", &args);
        }
        self.namespaces.clear();
        self.bridge = false;
    }

    /// The `ip` commands that undo what was made (to run here or on the signal thread): each
    /// veth pair deleted by its host end (a namespace outlives `ip netns del` while anything
    /// still holds it, and its veth end with it), each namespace, the bridge.
    pub fn cleanup_commands(&self) -> Vec<Vec<String>> {
        let mut v = Vec::new();
        for (i, ns) in self.namespaces.iter().enumerate() {
            v.push(vec![
                "link".into(),
                "del".into(),
                veth_name(self.tag, i as u32 + 1),
            ]);
            v.push(vec!["netns".into(), "del".into(), ns.clone()]);
        }
        if self.bridge {
            v.push(vec!["link".into(), "del".into(), bridge_name(self.tag)]);
        }
        v
    }
}

impl Drop for ChaosNet {
    fn drop(&mut self) {
        self.remove();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Each rule is the nftables statement it names, on the chain it must be on.
    #[test]
    fn rules_render_as_nftables_statements() {
        let a = Ipv4Addr::new(10, 200, 1, 2);
        assert_eq!(
            Rule::DropFrom(a).nft(),
            vec![("input", "ip saddr 10.200.1.2 drop".to_owned())]
        );
        assert_eq!(
            Rule::DropTo(a).nft(),
            vec![("output", "ip daddr 10.200.1.2 drop".to_owned())]
        );
        assert_eq!(Rule::Isolate.nft().len(), 2);
    }

    /// The queueing rules take `eth0`'s packets both ways (never loopback's), only the
    /// peer's when one is named, with the bypass that lets packets pass without a worker.
    #[test]
    fn queue_rules_take_eth0_both_ways_with_bypass() {
        let peer = Ipv4Addr::new(10, 200, 1, 3);
        assert_eq!(
            queue_rules(Some((18, Some(peer)))),
            "*filter\n:INPUT ACCEPT [0:0]\n:OUTPUT ACCEPT [0:0]\n\
             -A INPUT -i eth0 -s 10.200.1.3 -j NFQUEUE --queue-num 18 --queue-bypass\n\
             -A OUTPUT -o eth0 -d 10.200.1.3 -j NFQUEUE --queue-num 18 --queue-bypass\n\
             COMMIT\n"
        );
        let all = queue_rules(Some((18, None)));
        assert!(all.contains("-A INPUT -i eth0 -j NFQUEUE --queue-num 18 --queue-bypass\n"));
        assert!(all.contains("-A OUTPUT -o eth0 -j NFQUEUE --queue-num 18 --queue-bypass\n"));
        assert_eq!(
            queue_rules(None),
            "*filter\n:INPUT ACCEPT [0:0]\n:OUTPUT ACCEPT [0:0]\nCOMMIT\n"
        );
    }
}
