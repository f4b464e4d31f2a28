// The cluster as the brokers see it, polled: compat/brokers.sh runs it in the background so that
// the moment a broker is fenced, loses its leaders or rejoins the ISR is timed to the poll
// interval rather than to a JVM start per check. Compiled by compat/install.sh against
// compat/jars.
//
//   java -cp 'compat/build/brokers:compat/jars/*' BrokerMonitor --bootstrap HOST:PORT[,...]
//        [--topics T1,T2] [--interval-ms 100] [--duration-s 900]
//
// Every --interval-ms it asks a broker for DescribeCluster with fenced brokers included (KIP-1073)
// and describes --topics (leaders and ISRs), and prints a JSON line to stdout whenever the answer
// differs from the last one:
//   {"t": epoch ms, "unfenced": [ids], "fenced": [ids], "partitions": n, "offline": n,
//    "leaders": {"id": partitions led}, "isr": {"id": partitions whose ISR holds it},
//    "topics": [topics found]}
// or {"t": ..., "error": "..."} when the brokers did not answer (printed once per change too).

import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.Properties;
import java.util.TreeMap;
import java.util.TreeSet;
import java.util.concurrent.ExecutionException;
import java.util.concurrent.TimeUnit;

import org.apache.kafka.clients.admin.Admin;
import org.apache.kafka.clients.admin.AdminClientConfig;
import org.apache.kafka.clients.admin.DescribeClusterOptions;
import org.apache.kafka.clients.admin.TopicDescription;
import org.apache.kafka.common.KafkaFuture;
import org.apache.kafka.common.Node;
import org.apache.kafka.common.TopicPartitionInfo;

public final class BrokerMonitor {
    private static String join(Iterable<Integer> ids) {
        StringBuilder b = new StringBuilder("[");
        for (Integer i : ids) {
            if (b.length() > 1) {
                b.append(',');
            }
            b.append(i);
        }
        return b.append(']').toString();
    }

    private static String counts(Map<Integer, Integer> m) {
        StringBuilder b = new StringBuilder("{");
        for (Map.Entry<Integer, Integer> e : m.entrySet()) {
            if (b.length() > 1) {
                b.append(',');
            }
            b.append('"').append(e.getKey()).append("\":").append(e.getValue());
        }
        return b.append('}').toString();
    }

    private static String quote(String s) {
        return "\"" + s.replace("\\", "\\\\").replace("\"", "\\\"").replace("\n", " ") + "\"";
    }

    private static String poll(Admin admin, List<String> topics, long timeoutMs) throws Exception {
        var cluster = admin.describeCluster(new DescribeClusterOptions().includeFencedBrokers(true)
                .timeoutMs((int) timeoutMs));
        TreeSet<Integer> unfenced = new TreeSet<>();
        TreeSet<Integer> fenced = new TreeSet<>();
        for (Node n : cluster.nodes().get(timeoutMs, TimeUnit.MILLISECONDS)) {
            (n.isFenced() ? fenced : unfenced).add(n.id());
        }
        TreeMap<Integer, Integer> leaders = new TreeMap<>();
        TreeMap<Integer, Integer> isr = new TreeMap<>();
        List<String> found = new ArrayList<>();
        int partitions = 0;
        int offline = 0;
        if (!topics.isEmpty()) {
            Map<String, KafkaFuture<TopicDescription>> futures = admin.describeTopics(topics).topicNameValues();
            for (String t : topics) {
                TopicDescription d;
                try {
                    d = futures.get(t).get(timeoutMs, TimeUnit.MILLISECONDS);
                } catch (ExecutionException e) {
                    if (e.getCause() instanceof org.apache.kafka.common.errors.UnknownTopicOrPartitionException) {
                        continue;
                    }
                    throw e;
                }
                found.add(t);
                for (TopicPartitionInfo p : d.partitions()) {
                    partitions++;
                    if (p.leader() == null || p.leader().isEmpty()) {
                        offline++;
                    } else {
                        leaders.merge(p.leader().id(), 1, Integer::sum);
                    }
                    for (Node n : p.isr()) {
                        isr.merge(n.id(), 1, Integer::sum);
                    }
                }
            }
        }
        StringBuilder topicsJson = new StringBuilder("[");
        for (String t : found) {
            if (topicsJson.length() > 1) {
                topicsJson.append(',');
            }
            topicsJson.append(quote(t));
        }
        topicsJson.append(']');
        return "\"unfenced\":" + join(unfenced) + ",\"fenced\":" + join(fenced) + ",\"partitions\":" + partitions
                + ",\"offline\":" + offline + ",\"leaders\":" + counts(leaders) + ",\"isr\":" + counts(isr)
                + ",\"topics\":" + topicsJson;
    }

    public static void main(String[] args) throws InterruptedException {
        String bootstrap = null;
        List<String> topics = new ArrayList<>();
        long interval = 100;
        long duration = 900;
        for (int i = 0; i + 1 < args.length; i += 2) {
            switch (args[i]) {
                case "--bootstrap" -> bootstrap = args[i + 1];
                case "--topics" -> {
                    for (String t : args[i + 1].split(",")) {
                        if (!t.isBlank()) {
                            topics.add(t);
                        }
                    }
                }
                case "--interval-ms" -> interval = Long.parseLong(args[i + 1]);
                case "--duration-s" -> duration = Long.parseLong(args[i + 1]);
                default -> {
                    System.err.println("BrokerMonitor: unknown argument " + args[i]);
                    System.exit(2);
                }
            }
        }
        if (bootstrap == null || args.length % 2 != 0) {
            System.err.println("BrokerMonitor: --bootstrap HOST:PORT[,...] [--topics T,...] [--interval-ms MS] [--duration-s S]");
            System.exit(2);
        }
        Properties p = new Properties();
        p.put(AdminClientConfig.BOOTSTRAP_SERVERS_CONFIG, bootstrap);
        p.put(AdminClientConfig.CLIENT_ID_CONFIG, "broker-monitor");
        p.put(AdminClientConfig.REQUEST_TIMEOUT_MS_CONFIG, "1500");
        p.put(AdminClientConfig.DEFAULT_API_TIMEOUT_MS_CONFIG, "3000");
        p.put(AdminClientConfig.RECONNECT_BACKOFF_MS_CONFIG, "50");
        p.put(AdminClientConfig.RECONNECT_BACKOFF_MAX_MS_CONFIG, "500");
        long end = System.nanoTime() + TimeUnit.SECONDS.toNanos(duration);
        String last = null;
        try (Admin admin = Admin.create(p)) {
            while (System.nanoTime() < end) {
                long next = System.nanoTime() + TimeUnit.MILLISECONDS.toNanos(interval);
                String s;
                try {
                    s = poll(admin, topics, 3000);
                } catch (Exception e) {
                    Throwable c = e instanceof ExecutionException && e.getCause() != null ? e.getCause() : e;
                    s = "\"error\":" + quote(c.getClass().getSimpleName() + ": " + c.getMessage());
                }
                if (!s.equals(last)) {
                    System.out.println("{\"t\":" + System.currentTimeMillis() + "," + s + "}");
                    System.out.flush();
                    last = s;
                }
                long wait = next - System.nanoTime();
                if (wait > 0) {
                    Thread.sleep(Duration.ofNanos(wait).toMillis());
                }
            }
        }
    }
}
