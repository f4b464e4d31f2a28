// The Java AdminClient's side of probes/not_controller.py: one operation against the fake
// cluster, then what the application got. Run as a single source file:
//   java -cp 'compat/jars/*' compat/probes/NotControllerProbe.java HOST:PORT create|delete|partitions TOPIC
import java.util.List;
import java.util.Map;
import java.util.Properties;

import org.apache.kafka.clients.admin.Admin;
import org.apache.kafka.clients.admin.AdminClientConfig;
import org.apache.kafka.clients.admin.NewPartitions;
import org.apache.kafka.clients.admin.NewTopic;

public final class NotControllerProbe {
    public static void main(String[] args) {
        Properties p = new Properties();
        p.put(AdminClientConfig.BOOTSTRAP_SERVERS_CONFIG, args[0]);
        p.put(AdminClientConfig.CLIENT_ID_CONFIG, "probe");
        p.put(AdminClientConfig.DEFAULT_API_TIMEOUT_MS_CONFIG, "20000");
        p.put(AdminClientConfig.REQUEST_TIMEOUT_MS_CONFIG, "10000");
        String topic = args[2];
        try (Admin admin = Admin.create(p)) {
            switch (args[1]) {
                case "create" -> admin.createTopics(List.of(new NewTopic(topic, 1, (short) 1))).all().get();
                case "delete" -> admin.deleteTopics(List.of(topic)).all().get();
                case "partitions" -> admin.createPartitions(Map.of(topic, NewPartitions.increaseTo(2))).all().get();
                default -> throw new IllegalArgumentException(args[1]);
            }
            System.out.println("application got: success");
        } catch (Exception e) {
            Throwable c = e.getCause() != null ? e.getCause() : e;
            System.out.println("application got: " + c.getClass().getSimpleName() + ": " + c.getMessage());
        }
    }
}
