// Apache Kafka's Java AdminClient session, compiled by compat/install.sh against compat/jars.
//
// Through the brokers (bootstrap.servers): describe cluster; create topics (validate-only,
// explicit assignments, configs, partitions and replication factor left to the cluster) and the
// errors for an existing topic, zero partitions and too many replicas; list and describe topics;
// create partitions (and a decrease, refused); describe topic and broker configs; incrementally
// alter configs (SET, DELETE, APPEND, SUBTRACT, validate-only); describe features and a
// validate-only upgrade; describe the metadata quorum; delete topics by name and by id (and an
// unknown one). Through the controllers (bootstrap.controllers, KIP-919), when given: describe
// cluster (controller endpoints), the metadata quorum, features, a broker's configs, and an
// incremental config change. After the failover pause everything acknowledged is checked again.
//
// Arguments: --bootstrap HOST:PORT[,...] [--controller-bootstrap HOST:PORT[,...]]
//            [--through-failover DIR] [--pause-timeout-s S] [--settle-s S] [--prefix P]
//            [--broker-ids ID,...]   (as the Python sessions; see common.py)
// Exits 0 when every answer was right, 1 at the first wrong one, 2 on a usage error.

import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.Collection;
import java.util.HashMap;
import java.util.HashSet;
import java.util.List;
import java.util.Map;
import java.util.Optional;
import java.util.Properties;
import java.util.Set;
import java.util.TreeMap;
import java.util.concurrent.ExecutionException;
import java.util.concurrent.TimeUnit;
import java.util.stream.Collectors;

import org.apache.kafka.clients.admin.Admin;
import org.apache.kafka.clients.admin.AdminClientConfig;
import org.apache.kafka.clients.admin.AlterConfigOp;
import org.apache.kafka.clients.admin.AlterConfigsOptions;
import org.apache.kafka.clients.admin.Config;
import org.apache.kafka.clients.admin.ConfigEntry;
import org.apache.kafka.clients.admin.CreateTopicsOptions;
import org.apache.kafka.clients.admin.CreateTopicsResult;
import org.apache.kafka.clients.admin.DescribeClusterResult;
import org.apache.kafka.clients.admin.FeatureMetadata;
import org.apache.kafka.clients.admin.FeatureUpdate;
import org.apache.kafka.clients.admin.FinalizedVersionRange;
import org.apache.kafka.clients.admin.NewPartitions;
import org.apache.kafka.clients.admin.NewTopic;
import org.apache.kafka.clients.admin.QuorumInfo;
import org.apache.kafka.clients.admin.SupportedVersionRange;
import org.apache.kafka.clients.admin.TopicDescription;
import org.apache.kafka.clients.admin.UpdateFeaturesOptions;
import org.apache.kafka.common.KafkaFuture;
import org.apache.kafka.common.Node;
import org.apache.kafka.common.TopicCollection;
import org.apache.kafka.common.Uuid;
import org.apache.kafka.common.config.ConfigResource;
import org.apache.kafka.common.errors.InvalidPartitionsException;
import org.apache.kafka.common.errors.InvalidReplicationFactorException;
import org.apache.kafka.common.errors.TopicExistsException;
import org.apache.kafka.common.errors.UnknownTopicOrPartitionException;

public final class AdminSession {
    private static final long TIMEOUT_MS = 30_000;

    /** The cluster answered something other than what Kafka's semantics require. */
    static final class WrongAnswer extends Exception {
        private static final long serialVersionUID = 1L;

        WrongAnswer(String message) {
            super(message);
        }
    }

    @FunctionalInterface
    interface Step<T> {
        T run() throws Exception;
    }

    @FunctionalInterface
    interface Check {
        void run() throws Exception;
    }

    private final Map<String, String> args;
    private final long started = System.nanoTime();
    private final String prefix;
    private final double settleS;
    // What the cluster acknowledged; checked again after the failover pause.
    private final Map<String, Integer> ackedTopics = new TreeMap<>();
    private final Set<String> ackedDeleted = new HashSet<>();
    private final Map<String, Map<String, String>> ackedConfigs = new TreeMap<>();

    private AdminSession(Map<String, String> args) {
        this.args = args;
        this.prefix = args.getOrDefault("--prefix",
            String.format("compat-java-%09d-%03d-", System.currentTimeMillis() % 1_000_000_000L,
                ProcessHandle.current().pid() % 1000));
        this.settleS = Double.parseDouble(args.getOrDefault("--settle-s", "30"));
    }

    public static void main(String[] argv) {
        Map<String, String> args = new HashMap<>();
        for (int i = 0; i < argv.length; i++) {
            if (!argv[i].startsWith("--") || i + 1 >= argv.length) {
                System.err.println("usage: AdminSession --bootstrap HOST:PORT[,...] [--controller-bootstrap ...] "
                    + "[--through-failover DIR] [--pause-timeout-s S] [--settle-s S] [--prefix P] [--broker-ids ID,...]");
                System.exit(2);
            }
            args.put(argv[i], argv[++i]);
        }
        if (!args.containsKey("--bootstrap")) {
            System.err.println("AdminSession: --bootstrap is required");
            System.exit(2);
        }
        new AdminSession(args).run();
    }

    private void log(String message) {
        System.out.printf("[java-admin %7.2fs] %s%n", (System.nanoTime() - started) / 1e9, message);
        System.out.flush();
    }

    private <T> T step(String name, Step<T> body) {
        long t0 = System.nanoTime();
        T result = null;
        try {
            result = body.run();
        } catch (WrongAnswer e) {
            fail("step '" + name + "': wrong answer: " + e.getMessage());
        } catch (Exception e) {
            Throwable cause = e instanceof ExecutionException && e.getCause() != null ? e.getCause() : e;
            cause.printStackTrace();
            fail("step '" + name + "': " + cause.getClass().getSimpleName() + ": " + cause.getMessage());
        }
        log(String.format("ok   %s (%d ms)", name, (System.nanoTime() - t0) / 1_000_000));
        return result;
    }

    private void stepV(String name, Check body) {
        step(name, () -> {
            body.run();
            return null;
        });
    }

    private void fail(String message) {
        log("FAIL " + message);
        System.exit(1);
    }

    private static void check(boolean condition, String message) throws WrongAnswer {
        if (!condition) {
            throw new WrongAnswer(message);
        }
    }

    private static void checkEq(Object got, Object want, String what) throws WrongAnswer {
        if (!java.util.Objects.equals(got, want)) {
            throw new WrongAnswer(what + ": got " + got + ", want " + want);
        }
    }

    /** Repeats a read until it matches, for at most --settle-s (a broker's metadata lags its controller). */
    private void eventually(Check body, String what) throws Exception {
        long deadline = System.nanoTime() + (long) (settleS * 1e9);
        long delayMs = 50;
        while (true) {
            try {
                body.run();
                return;
            } catch (WrongAnswer e) {
                if (System.nanoTime() >= deadline) {
                    throw new WrongAnswer(what + " (still after " + (long) settleS + " s): " + e.getMessage());
                }
            }
            Thread.sleep(delayMs);
            delayMs = Math.min(delayMs * 2, 1000);
        }
    }

    /** The Kafka exception a future failed with, or null when it succeeded. */
    private static Throwable failure(KafkaFuture<?> future) throws InterruptedException {
        try {
            future.get(TIMEOUT_MS, TimeUnit.MILLISECONDS);
            return null;
        } catch (ExecutionException e) {
            return e.getCause();
        } catch (java.util.concurrent.TimeoutException e) {
            return e;
        }
    }

    private static void expectFailure(KafkaFuture<?> future, Class<? extends Throwable> want, String what)
            throws Exception {
        Throwable got = failure(future);
        check(want.isInstance(got), what + ": got " + (got == null ? "success" : got.toString())
            + ", want " + want.getSimpleName());
    }

    private boolean pause() {
        String dir = args.get("--through-failover");
        if (dir == null) {
            return false;
        }
        try {
            Path d = Path.of(dir);
            Files.createDirectories(d);
            Files.writeString(d.resolve("paused"), "java-admin\n");
            Path resume = d.resolve("resume");
            log("paused: waiting for " + resume);
            double timeoutS = Double.parseDouble(args.getOrDefault("--pause-timeout-s", "300"));
            long deadline = System.nanoTime() + (long) (timeoutS * 1e9);
            while (!Files.exists(resume)) {
                if (System.nanoTime() >= deadline) {
                    fail("nobody created " + resume + " within " + (long) timeoutS + " s");
                }
                Thread.sleep(100);
            }
        } catch (Exception e) {
            fail("pause: " + e);
        }
        log("resumed");
        return true;
    }

    private static Admin admin(String key, String servers) {
        Properties p = new Properties();
        p.put(key, servers);
        p.put(AdminClientConfig.CLIENT_ID_CONFIG, key.equals(AdminClientConfig.BOOTSTRAP_SERVERS_CONFIG)
            ? "compat-java-admin" : "compat-java-admin-controller");
        p.put(AdminClientConfig.REQUEST_TIMEOUT_MS_CONFIG, "10000");
        p.put(AdminClientConfig.DEFAULT_API_TIMEOUT_MS_CONFIG, String.valueOf(TIMEOUT_MS));
        return Admin.create(p);
    }

    private void run() {
        try (Admin admin = admin(AdminClientConfig.BOOTSTRAP_SERVERS_CONFIG, args.get("--bootstrap"))) {
            brokerSide(admin);
        }
        log(String.format("PASS (%.1f s)", (System.nanoTime() - started) / 1e9));
        System.exit(0);
    }

    private List<Integer> describeCluster(Admin admin, String what) throws Exception {
        DescribeClusterResult d = admin.describeCluster();
        String clusterId = d.clusterId().get();
        Node controller = d.controller().get();
        List<Integer> ids = d.nodes().get().stream().map(Node::id).sorted().collect(Collectors.toList());
        check(clusterId != null && !clusterId.isEmpty(), what + ": empty cluster id");
        check(!ids.isEmpty(), what + ": no nodes");
        check(controller != null && ids.contains(controller.id()),
            what + ": controller " + controller + " is not one of the nodes " + ids);
        return ids;
    }

    private Map<String, TopicDescription> describeTopics(Admin admin, Collection<String> names) throws Exception {
        return admin.describeTopics(names).allTopicNames().get();
    }

    private void listed(Admin admin) throws Exception {
        Set<String> names = admin.listTopics().names().get();
        for (String t : ackedTopics.keySet()) {
            check(names.contains(t), "topic " + t + " missing from listTopics");
        }
        for (String t : ackedDeleted) {
            check(!names.contains(t), "topic " + t + " listed but deleted or validate-only");
        }
        Map<String, TopicDescription> described = describeTopics(admin, ackedTopics.keySet());
        for (Map.Entry<String, Integer> t : ackedTopics.entrySet()) {
            checkEq(described.get(t.getKey()).partitions().size(), t.getValue(), "partitions of " + t.getKey());
        }
    }

    private Map<String, ConfigEntry> configs(Admin admin, ConfigResource r) throws Exception {
        Config c = admin.describeConfigs(List.of(r)).all().get().get(r);
        Map<String, ConfigEntry> out = new HashMap<>();
        for (ConfigEntry e : c.entries()) {
            out.put(e.name(), e);
        }
        return out;
    }

    private Map<String, ConfigEntry> checkConfigs(Admin admin, String topic, Map<String, String> want,
            ConfigEntry.ConfigSource source) throws Exception {
        Map<String, ConfigEntry> got = configs(admin, new ConfigResource(ConfigResource.Type.TOPIC, topic));
        for (Map.Entry<String, String> w : want.entrySet()) {
            ConfigEntry e = got.get(w.getKey());
            check(e != null, topic + ": config " + w.getKey() + " not described");
            checkEq(e.value(), w.getValue(), topic + " " + w.getKey());
            checkEq(e.source(), source, topic + " " + w.getKey() + " source");
        }
        return got;
    }

    private void incremental(Admin admin, String topic, List<AlterConfigOp> ops, boolean validateOnly)
            throws Exception {
        ConfigResource r = new ConfigResource(ConfigResource.Type.TOPIC, topic);
        admin.incrementalAlterConfigs(Map.of(r, ops), new AlterConfigsOptions().validateOnly(validateOnly))
            .all().get();
    }

    private static AlterConfigOp op(String key, String value, AlterConfigOp.OpType type) {
        return new AlterConfigOp(new ConfigEntry(key, value), type);
    }

    private void brokerSide(Admin admin) {
        List<Integer> nodes = step("describe cluster", () -> describeCluster(admin, "describeCluster"));
        // The brokers replicas go to: --broker-ids (where the cluster also lists controllers), else all.
        List<Integer> brokers = step("replica brokers", () -> {
            String ids = args.get("--broker-ids");
            if (ids == null) {
                return nodes;
            }
            List<Integer> given = java.util.Arrays.stream(ids.split(",")).map(Integer::valueOf).sorted()
                .collect(Collectors.toList());
            check(nodes.containsAll(given), "--broker-ids " + given + " not all among the nodes the cluster lists " + nodes);
            return given;
        });
        int rf = Math.min(3, brokers.size());
        short rfs = (short) rf;
        String a = prefix + "a", b = prefix + "b", c = prefix + "c", d = prefix + "d", v = prefix + "v";
        String e = prefix + "e", bad = prefix + "bad";
        Map<String, String> dConfigs = Map.of("cleanup.policy", "compact", "retention.ms", "86400000");

        stepV("create topics (3 partitions; -1/-1; explicit assignment; configs)", () -> {
            Map<Integer, List<Integer>> assignment = Map.of(0, List.of(brokers.get(0)),
                1, List.of(brokers.get(brokers.size() - 1)));
            CreateTopicsResult r = admin.createTopics(List.of(
                new NewTopic(a, 3, rfs),
                new NewTopic(b, Optional.empty(), Optional.empty()),
                new NewTopic(c, assignment),
                new NewTopic(d, 1, rfs).configs(dConfigs)));
            r.all().get();
            ackedTopics.put(a, 3);
            ackedTopics.put(c, 2);
            ackedTopics.put(d, 1);
            ackedConfigs.put(d, dConfigs);
            checkEq(r.numPartitions(a).get(), 3, "numPartitions of " + a + " in the response");
            checkEq(r.config(d).get().get("cleanup.policy").value(), "compact", "config of " + d + " in the response");
        });
        stepV("create topic validate-only", () -> {
            admin.createTopics(List.of(new NewTopic(v, 2, rfs)), new CreateTopicsOptions().validateOnly(true))
                .all().get();
            ackedDeleted.add(v);
        });
        stepV("create existing topic -> TopicExistsException", () -> expectFailure(
            admin.createTopics(List.of(new NewTopic(a, 3, rfs))).all(), TopicExistsException.class, "create " + a));
        stepV("create with 0 partitions -> InvalidPartitionsException", () -> expectFailure(
            admin.createTopics(List.of(new NewTopic(bad, 0, rfs))).all(), InvalidPartitionsException.class,
            "0 partitions"));
        stepV("create with more replicas than brokers -> InvalidReplicationFactorException", () -> expectFailure(
            admin.createTopics(List.of(new NewTopic(bad, 1, (short) (nodes.size() + 1)))).all(),
            InvalidReplicationFactorException.class, "too many replicas"));

        stepV("list and describe topics", () -> eventually(() -> {
            listed(admin);
            Map<String, TopicDescription> t = describeTopics(admin, List.of(a, b, c));
            check(!t.get(b).partitions().isEmpty(), b + " has no partitions");
            ackedTopics.put(b, t.get(b).partitions().size());
            Map<Integer, List<Integer>> replicas = new TreeMap<>();
            t.get(c).partitions().forEach(p -> replicas.put(p.partition(),
                p.replicas().stream().map(Node::id).collect(Collectors.toList())));
            checkEq(replicas, Map.of(0, List.of(brokers.get(0)), 1, List.of(brokers.get(brokers.size() - 1))),
                "replicas of " + c + " (explicit assignment)");
            checkEq(t.get(a).partitions().get(0).replicas().size(), rf, "replication factor of " + a);
            check(t.get(a).topicId() != null && !t.get(a).topicId().equals(Uuid.ZERO_UUID), a + " has no topic id");
        }, "topics not as created"));

        stepV("create partitions 3 -> 5 (and 5 -> 4 refused)", () -> {
            admin.createPartitions(Map.of(a, NewPartitions.increaseTo(5))).all().get();
            ackedTopics.put(a, 5);
            eventually(() -> listed(admin), "partition count after createPartitions");
            expectFailure(admin.createPartitions(Map.of(a, NewPartitions.increaseTo(4))).all(),
                InvalidPartitionsException.class, "decrease to 4 partitions");
        });

        stepV("describe topic configs", () -> eventually(() -> {
            Map<String, ConfigEntry> got = checkConfigs(admin, d, dConfigs, ConfigEntry.ConfigSource.DYNAMIC_TOPIC_CONFIG);
            for (String k : List.of("retention.bytes", "segment.bytes", "min.insync.replicas",
                    "max.message.bytes", "compression.type")) {
                check(got.containsKey(k), d + ": default config " + k + " not described");
            }
            ConfigEntry.ConfigSource src = got.get("segment.bytes").source();
            check(src == ConfigEntry.ConfigSource.DEFAULT_CONFIG || src == ConfigEntry.ConfigSource.STATIC_BROKER_CONFIG,
                "source of an unset key: " + src);
        }, "configs set at creation"));

        stepV("incremental alter configs (SET, APPEND, SUBTRACT, DELETE, validate-only)", () -> {
            incremental(admin, a, List.of(op("retention.ms", "3600000", AlterConfigOp.OpType.SET),
                op("cleanup.policy", "delete", AlterConfigOp.OpType.SET)), false);
            eventually(() -> checkConfigs(admin, a, Map.of("retention.ms", "3600000", "cleanup.policy", "delete"),
                ConfigEntry.ConfigSource.DYNAMIC_TOPIC_CONFIG), "configs after SET");
            incremental(admin, a, List.of(op("cleanup.policy", "compact", AlterConfigOp.OpType.APPEND)), false);
            eventually(() -> checkConfigs(admin, a, Map.of("cleanup.policy", "delete,compact"),
                ConfigEntry.ConfigSource.DYNAMIC_TOPIC_CONFIG), "config after APPEND");
            incremental(admin, a, List.of(op("cleanup.policy", "delete", AlterConfigOp.OpType.SUBTRACT)), false);
            eventually(() -> checkConfigs(admin, a, Map.of("cleanup.policy", "compact"),
                ConfigEntry.ConfigSource.DYNAMIC_TOPIC_CONFIG), "config after SUBTRACT");
            incremental(admin, a, List.of(op("cleanup.policy", null, AlterConfigOp.OpType.DELETE)), false);
            eventually(() -> checkConfigs(admin, a, Map.of("cleanup.policy", "delete"),
                ConfigEntry.ConfigSource.DEFAULT_CONFIG), "config after DELETE");
            incremental(admin, a, List.of(op("retention.ms", "1000", AlterConfigOp.OpType.SET)), true);
            checkConfigs(admin, a, Map.of("retention.ms", "3600000"), ConfigEntry.ConfigSource.DYNAMIC_TOPIC_CONFIG);
            ackedConfigs.put(a, Map.of("retention.ms", "3600000"));
        });

        stepV("describe broker configs", () -> {
            Map<String, ConfigEntry> got = configs(admin,
                new ConfigResource(ConfigResource.Type.BROKER, String.valueOf(brokers.get(0))));
            for (String k : List.of("num.partitions", "default.replication.factor", "log.segment.bytes")) {
                check(got.containsKey(k), "broker " + brokers.get(0) + ": config " + k + " not described");
            }
        });

        stepV("describe features; validate-only upgrade", () -> features(admin));
        stepV("describe metadata quorum", () -> quorum(admin));

        stepV("delete topics by name and by id (and an unknown one)", () -> {
            admin.deleteTopics(List.of(b)).all().get();
            ackedTopics.remove(b);
            ackedDeleted.add(b);
            Uuid cId = describeTopics(admin, List.of(c)).get(c).topicId();
            admin.deleteTopics(TopicCollection.ofTopicIds(List.of(cId))).all().get();
            ackedTopics.remove(c);
            ackedDeleted.add(c);
            eventually(() -> listed(admin), "topics after delete");
            expectFailure(admin.deleteTopics(List.of(prefix + "never-created")).all(),
                UnknownTopicOrPartitionException.class, "delete of an unknown topic");
        });

        String controllers = args.get("--controller-bootstrap");
        if (controllers != null) {
            try (Admin ctl = admin(AdminClientConfig.BOOTSTRAP_CONTROLLERS_CONFIG, controllers)) {
                controllerSide(ctl);
            }
        } else {
            log("no --controller-bootstrap: the bootstrap.controllers steps did not run");
        }

        if (pause()) {
            stepV("after failover: acknowledged topics still there", () -> eventually(() -> listed(admin), "topics"));
            for (Map.Entry<String, Map<String, String>> cfg : ackedConfigs.entrySet()) {
                stepV("after failover: configs of " + cfg.getKey() + " still set", () -> eventually(() ->
                    checkConfigs(admin, cfg.getKey(), cfg.getValue(), ConfigEntry.ConfigSource.DYNAMIC_TOPIC_CONFIG),
                    "configs"));
            }
            stepV("after failover: describe cluster", () -> describeCluster(admin, "describeCluster"));
            stepV("after failover: describe metadata quorum", () -> quorum(admin));
            if (controllers != null) {
                try (Admin ctl = admin(AdminClientConfig.BOOTSTRAP_CONTROLLERS_CONFIG, controllers)) {
                    stepV("after failover: describe cluster (controllers)", () ->
                        describeCluster(ctl, "describeCluster via bootstrap.controllers"));
                    stepV("after failover: describe metadata quorum (controllers)", () -> quorum(ctl));
                }
            }
        }

        stepV("create one more topic", () -> {
            admin.createTopics(List.of(new NewTopic(e, Optional.of(1), Optional.empty()))).all().get();
            ackedTopics.put(e, 1);
            eventually(() -> listed(admin), "topic created last");
        });
        stepV("delete the session's topics", () -> {
            List<String> names = new ArrayList<>(ackedTopics.keySet());
            admin.deleteTopics(names).all().get();
            ackedDeleted.addAll(names);
            ackedTopics.clear();
            eventually(() -> listed(admin), "topics after the final delete");
        });
    }

    private void features(Admin admin) throws Exception {
        FeatureMetadata f = admin.describeFeatures().featureMetadata().get();
        SupportedVersionRange supported = f.supportedFeatures().get("metadata.version");
        FinalizedVersionRange finalized = f.finalizedFeatures().get("metadata.version");
        check(supported != null, "metadata.version not among supported features " + f.supportedFeatures().keySet());
        check(finalized != null, "metadata.version not finalized: " + f.finalizedFeatures().keySet());
        short level = finalized.maxVersionLevel();
        check(supported.minVersion() <= level && level <= supported.maxVersion(),
            "finalized metadata.version " + level + " outside supported " + supported);
        admin.updateFeatures(Map.of("metadata.version",
                new FeatureUpdate(supported.maxVersion(), FeatureUpdate.UpgradeType.UPGRADE)),
            new UpdateFeaturesOptions().validateOnly(true)).all().get();
        Throwable tooHigh = failure(admin.updateFeatures(Map.of("metadata.version",
                new FeatureUpdate((short) (supported.maxVersion() + 1), FeatureUpdate.UpgradeType.UPGRADE)),
            new UpdateFeaturesOptions().validateOnly(true)).all());
        check(tooHigh != null, "validate-only upgrade above the supported range was accepted");
    }

    private void quorum(Admin admin) throws Exception {
        QuorumInfo q = admin.describeMetadataQuorum().quorumInfo().get();
        Set<Integer> voters = q.voters().stream().map(QuorumInfo.ReplicaState::replicaId).collect(Collectors.toSet());
        check(voters.contains(q.leaderId()), "leader " + q.leaderId() + " not among voters " + voters);
        check(q.highWatermark() > 0, "high watermark " + q.highWatermark());
        check(q.leaderEpoch() > 0, "leader epoch " + q.leaderEpoch());
    }

    private void controllerSide(Admin ctl) {
        List<Integer> controllers = step("describe cluster (controllers)",
            () -> describeCluster(ctl, "describeCluster via bootstrap.controllers"));
        stepV("describe metadata quorum (controllers)", () -> {
            quorum(ctl);
            Set<Integer> voters = ctl.describeMetadataQuorum().quorumInfo().get().voters().stream()
                .map(QuorumInfo.ReplicaState::replicaId).collect(Collectors.toSet());
            checkEq(voters, new HashSet<>(controllers), "voters vs the controllers DescribeCluster listed");
        });
        stepV("describe features (controllers)", () -> {
            FeatureMetadata f = ctl.describeFeatures().featureMetadata().get();
            check(f.finalizedFeatures().containsKey("metadata.version"), "metadata.version not finalized");
        });
        stepV("describe a controller's configs (controllers)", () -> {
            Map<String, ConfigEntry> got = configs(ctl,
                new ConfigResource(ConfigResource.Type.BROKER, String.valueOf(controllers.get(0))));
            check(!got.isEmpty(), "no configs described for controller " + controllers.get(0));
        });
        String a = prefix + "a";
        stepV("incremental alter a topic config (controllers)", () -> {
            ConfigResource r = new ConfigResource(ConfigResource.Type.TOPIC, a);
            ctl.incrementalAlterConfigs(Map.of(r, List.of(op("max.message.bytes", "2000000",
                AlterConfigOp.OpType.SET)))).all().get();
            Map<String, String> want = new HashMap<>(ackedConfigs.getOrDefault(a, Map.of()));
            want.put("max.message.bytes", "2000000");
            ackedConfigs.put(a, want);
        });
    }
}
