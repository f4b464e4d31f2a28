// The data check of compat/brokers.sh: an idempotent producer (acks=all) writes N numbered
// messages to one topic while a consumer group reads them back; then every acknowledged message
// must have been consumed exactly once. Compiled by compat/install.sh against compat/jars.
//
//   java -cp 'compat/build/brokers:compat/jars/*' BrokerTraffic --bootstrap HOST:PORT[,...]
//        --topic T [--messages 100000] [--size 100] [--rate 0] [--group G]
//        [--timeout-s 300] [--drain-timeout-s 120] [--allow-unacked]
//
// Each message's value starts with its number (8 bytes, big-endian), padded to --size bytes; the
// key is the number in decimal, so messages spread over the partitions. --rate caps the
// messages sent per second (0: as fast as the producer takes them). While it runs, a progress
// line goes to stderr every 500 ms (sent, acked, failed, consumed). At the end one JSON line goes
// to stdout:
//   sent, acked, failed        sends handed to the producer; acknowledged; failed for good
//   consumed                   records the consumer returned (all of them)
//   unique                     distinct message numbers consumed
//   duplicates                 messages found at more than one (partition, offset): written
//                              twice, which idempotence forbids
//   redelivered                a (partition, offset) returned again (the group re-read from its
//                              committed offset after a rebalance): not a duplicate in the log
//   missing                    acknowledged messages never consumed
//   unacked_consumed           messages whose send failed or never finished but that are in the log
//   elapsed_ms, produce_ms, first_error, ok
// It exits 0 when ok: nothing missing, no duplicates, and (unless --allow-unacked) every send
// acknowledged; 1 otherwise; 2 on a usage error.

import java.nio.ByteBuffer;
import java.nio.charset.StandardCharsets;
import java.time.Duration;
import java.util.BitSet;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.Properties;
import java.util.concurrent.atomic.AtomicIntegerArray;
import java.util.concurrent.atomic.AtomicLong;
import java.util.concurrent.atomic.AtomicReference;

import org.apache.kafka.clients.consumer.ConsumerConfig;
import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.clients.consumer.ConsumerRecords;
import org.apache.kafka.clients.consumer.KafkaConsumer;
import org.apache.kafka.clients.producer.KafkaProducer;
import org.apache.kafka.clients.producer.ProducerConfig;
import org.apache.kafka.clients.producer.ProducerRecord;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.serialization.ByteArrayDeserializer;
import org.apache.kafka.common.serialization.ByteArraySerializer;

public final class BrokerTraffic {
    private static final int ACKED = 1;
    private static final int CONSUMED = 2;

    private final String bootstrap;
    private final String topic;
    private final int messages;
    private final int size;
    private final int rate;
    private final String group;
    private final long timeoutMs;
    private final long drainTimeoutMs;

    /** Per message number: ACKED and CONSUMED bits. */
    private final AtomicIntegerArray state;
    private final AtomicLong sent = new AtomicLong();
    private final AtomicLong acked = new AtomicLong();
    private final AtomicLong failed = new AtomicLong();
    /** Acknowledged and consumed: done when this reaches acked after the producer finished. */
    private final AtomicLong ackedAndConsumed = new AtomicLong();
    private final AtomicLong consumed = new AtomicLong();
    private final AtomicLong unique = new AtomicLong();
    private final AtomicLong duplicates = new AtomicLong();
    private final AtomicLong redelivered = new AtomicLong();
    private final AtomicReference<String> firstError = new AtomicReference<>();
    private volatile boolean producerDone;
    private volatile long producerDoneAt;

    private BrokerTraffic(Map<String, String> a) {
        bootstrap = required(a, "bootstrap");
        topic = required(a, "topic");
        messages = Integer.parseInt(a.getOrDefault("messages", "100000"));
        size = Math.max(8, Integer.parseInt(a.getOrDefault("size", "100")));
        rate = Integer.parseInt(a.getOrDefault("rate", "0"));
        group = a.getOrDefault("group", "traffic-" + topic);
        timeoutMs = 1000L * Long.parseLong(a.getOrDefault("timeout-s", "300"));
        drainTimeoutMs = 1000L * Long.parseLong(a.getOrDefault("drain-timeout-s", "120"));
        state = new AtomicIntegerArray(messages);
    }

    private static String required(Map<String, String> a, String k) {
        String v = a.get(k);
        if (v == null) {
            throw new IllegalArgumentException("--" + k + " is required");
        }
        return v;
    }

    /** Sets a bit of message i; counts it as acknowledged-and-consumed when it completes both. */
    private void mark(int i, int bit) {
        int old = state.getAndUpdate(i, v -> v | bit);
        if ((old & bit) == 0 && (old | bit) == (ACKED | CONSUMED)) {
            ackedAndConsumed.incrementAndGet();
        }
    }

    private void produce() throws InterruptedException {
        Properties p = new Properties();
        p.put(ProducerConfig.BOOTSTRAP_SERVERS_CONFIG, bootstrap);
        p.put(ProducerConfig.CLIENT_ID_CONFIG, "traffic-producer");
        p.put(ProducerConfig.ACKS_CONFIG, "all");
        p.put(ProducerConfig.ENABLE_IDEMPOTENCE_CONFIG, "true");
        p.put(ProducerConfig.MAX_IN_FLIGHT_REQUESTS_PER_CONNECTION, "5");
        p.put(ProducerConfig.LINGER_MS_CONFIG, "5");
        p.put(ProducerConfig.DELIVERY_TIMEOUT_MS_CONFIG, "120000");
        p.put(ProducerConfig.KEY_SERIALIZER_CLASS_CONFIG, ByteArraySerializer.class.getName());
        p.put(ProducerConfig.VALUE_SERIALIZER_CLASS_CONFIG, ByteArraySerializer.class.getName());
        long start = System.nanoTime();
        try (KafkaProducer<byte[], byte[]> producer = new KafkaProducer<>(p)) {
            for (int i = 0; i < messages; i++) {
                if (rate > 0) {
                    long due = start + (long) i * 1_000_000_000L / rate;
                    long wait = due - System.nanoTime();
                    if (wait > 0) {
                        Thread.sleep(wait / 1_000_000, (int) (wait % 1_000_000));
                    }
                }
                byte[] value = new byte[size];
                ByteBuffer.wrap(value).putLong(i);
                byte[] key = Integer.toString(i).getBytes(StandardCharsets.UTF_8);
                final int n = i;
                producer.send(new ProducerRecord<>(topic, key, value), (md, e) -> {
                    if (e == null) {
                        acked.incrementAndGet();
                        mark(n, ACKED);
                    } else {
                        failed.incrementAndGet();
                        firstError.compareAndSet(null, e.getClass().getSimpleName() + ": " + e.getMessage());
                    }
                });
                sent.incrementAndGet();
            }
            producer.flush();
        } catch (RuntimeException e) {
            firstError.compareAndSet(null, "producer: " + e);
        } finally {
            producerDoneAt = System.nanoTime();
            producerDone = true;
        }
    }

    private void consume(long deadline) {
        Properties p = new Properties();
        p.put(ConsumerConfig.BOOTSTRAP_SERVERS_CONFIG, bootstrap);
        p.put(ConsumerConfig.CLIENT_ID_CONFIG, "traffic-consumer");
        p.put(ConsumerConfig.GROUP_ID_CONFIG, group);
        p.put(ConsumerConfig.AUTO_OFFSET_RESET_CONFIG, "earliest");
        p.put(ConsumerConfig.KEY_DESERIALIZER_CLASS_CONFIG, ByteArrayDeserializer.class.getName());
        p.put(ConsumerConfig.VALUE_DESERIALIZER_CLASS_CONFIG, ByteArrayDeserializer.class.getName());
        int[] seen = new int[messages];
        Map<TopicPartition, BitSet> offsets = new HashMap<>();
        try (KafkaConsumer<byte[], byte[]> consumer = new KafkaConsumer<>(p)) {
            consumer.subscribe(List.of(topic));
            while (System.nanoTime() < deadline) {
                if (producerDone) {
                    if (ackedAndConsumed.get() >= acked.get()) {
                        break;
                    }
                    if (System.nanoTime() - producerDoneAt > drainTimeoutMs * 1_000_000L) {
                        break;
                    }
                }
                ConsumerRecords<byte[], byte[]> records = consumer.poll(Duration.ofMillis(200));
                for (ConsumerRecord<byte[], byte[]> r : records) {
                    consumed.incrementAndGet();
                    BitSet bits = offsets.computeIfAbsent(new TopicPartition(r.topic(), r.partition()), tp -> new BitSet());
                    if (r.offset() > Integer.MAX_VALUE || r.value() == null || r.value().length < 8) {
                        firstError.compareAndSet(null, "unexpected record at " + r.partition() + "@" + r.offset());
                        continue;
                    }
                    int off = (int) r.offset();
                    if (bits.get(off)) {
                        redelivered.incrementAndGet();
                        continue;
                    }
                    bits.set(off);
                    long id = ByteBuffer.wrap(r.value()).getLong();
                    if (id < 0 || id >= messages) {
                        firstError.compareAndSet(null, "unexpected message number " + id);
                        continue;
                    }
                    int n = (int) id;
                    if (seen[n]++ == 0) {
                        unique.incrementAndGet();
                        mark(n, CONSUMED);
                    } else {
                        duplicates.incrementAndGet();
                    }
                }
            }
        } catch (RuntimeException e) {
            firstError.compareAndSet(null, "consumer: " + e);
        }
    }

    private String progress(long start) {
        return String.format("progress elapsed_ms=%d sent=%d acked=%d failed=%d consumed=%d unique=%d",
                (System.nanoTime() - start) / 1_000_000, sent.get(), acked.get(), failed.get(),
                consumed.get(), unique.get());
    }

    private int run(boolean allowUnacked) throws InterruptedException {
        long start = System.nanoTime();
        long deadline = start + timeoutMs * 1_000_000L;
        Thread consumer = new Thread(() -> consume(deadline), "traffic-consumer");
        consumer.start();
        Thread reporter = new Thread(() -> {
            try {
                while (true) {
                    Thread.sleep(500);
                    System.err.println(progress(start));
                }
            } catch (InterruptedException e) {
                Thread.currentThread().interrupt();
            }
        }, "traffic-progress");
        reporter.setDaemon(true);
        reporter.start();
        produce();
        long produceMs = (producerDoneAt - start) / 1_000_000;
        consumer.join(Math.max(1, (deadline - System.nanoTime()) / 1_000_000 + 30_000));
        reporter.interrupt();
        System.err.println(progress(start));
        long missing = 0;
        long unackedConsumed = 0;
        for (int i = 0; i < messages; i++) {
            int s = state.get(i);
            if (s == ACKED) {
                missing++;
            } else if (s == CONSUMED) {
                unackedConsumed++;
            }
        }
        long unacked = sent.get() - acked.get();
        boolean ok = missing == 0 && duplicates.get() == 0 && acked.get() > 0
                && (allowUnacked || (unacked == 0 && sent.get() == messages));
        String err = firstError.get();
        System.out.printf("{\"topic\":\"%s\",\"sent\":%d,\"acked\":%d,\"failed\":%d,\"consumed\":%d,\"unique\":%d,"
                + "\"duplicates\":%d,\"redelivered\":%d,\"missing\":%d,\"unacked_consumed\":%d,"
                + "\"elapsed_ms\":%d,\"produce_ms\":%d,\"first_error\":%s,\"ok\":%b}%n",
                topic, sent.get(), acked.get(), failed.get(), consumed.get(), unique.get(), duplicates.get(),
                redelivered.get(), missing, unackedConsumed, (System.nanoTime() - start) / 1_000_000, produceMs,
                err == null ? "null" : "\"" + err.replace("\\", "\\\\").replace("\"", "\\\"") + "\"", ok);
        return ok ? 0 : 1;
    }

    public static void main(String[] args) throws InterruptedException {
        Map<String, String> a = new HashMap<>();
        boolean allowUnacked = false;
        try {
            for (int i = 0; i < args.length; i++) {
                if (args[i].equals("--allow-unacked")) {
                    allowUnacked = true;
                } else if (args[i].startsWith("--") && i + 1 < args.length) {
                    a.put(args[i].substring(2), args[++i]);
                } else {
                    throw new IllegalArgumentException("unexpected argument " + args[i]);
                }
            }
            BrokerTraffic t = new BrokerTraffic(a);
            System.exit(t.run(allowUnacked));
        } catch (IllegalArgumentException e) {
            System.err.println("BrokerTraffic: " + e.getMessage());
            System.exit(2);
        }
    }
}
