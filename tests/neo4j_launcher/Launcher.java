import java.io.IOException;
import java.io.InputStream;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.Map;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.atomic.AtomicBoolean;

import org.neo4j.configuration.GraphDatabaseSettings;
import org.neo4j.configuration.connectors.BoltConnector;
import org.neo4j.configuration.connectors.ConnectorPortRegister;
import org.neo4j.configuration.connectors.ConnectorType;
import org.neo4j.configuration.helpers.SocketAddress;
import org.neo4j.dbms.api.DatabaseManagementService;
import org.neo4j.dbms.api.DatabaseManagementServiceBuilder;
import org.neo4j.kernel.internal.GraphDatabaseAPI;

/**
 * Starts an embedded Neo4j Community server (5.26 LTS) with Bolt on a free localhost port,
 * for the test suite when neither $NEO4J_URI nor a Docker engine is available.
 *
 * <p>Usage: {@code java -cp CLASSPATH Launcher HOME_DIR PASSWORD [neo4j.conf]}. Prints
 * {@code NEO4J_READY bolt://127.0.0.1:PORT} once Bolt accepts connections with user
 * {@code neo4j} / PASSWORD, and shuts the database down cleanly when its standard input
 * closes (the parent test process died or finished) or on SIGTERM.
 */
public final class Launcher {
    private Launcher() {}

    public static void main(String[] args) throws Exception {
        if (args.length < 2) {
            System.err.println("usage: Launcher HOME_DIR PASSWORD [neo4j.conf]");
            System.exit(2);
        }
        Path home = Path.of(args[0]).toAbsolutePath();
        String password = args[1];
        Files.createDirectories(home);

        DatabaseManagementServiceBuilder builder = new DatabaseManagementServiceBuilder(home);
        if (args.length > 2) {
            // memory limits and the like, as raw neo4j.conf settings chosen by the Python side
            builder.loadPropertiesFromFile(Path.of(args[2]));
        }
        builder.setConfig(BoltConnector.enabled, true);
        // port 0: the OS picks a free port, so parallel test runs never collide
        builder.setConfig(BoltConnector.listen_address, new SocketAddress("127.0.0.1", 0));
        builder.setConfig(BoltConnector.encryption_level, BoltConnector.EncryptionLevel.DISABLED);
        builder.setConfig(GraphDatabaseSettings.auth_enabled, true);
        DatabaseManagementService service = builder.build();

        AtomicBoolean stopped = new AtomicBoolean(false);
        CountDownLatch done = new CountDownLatch(1);
        Runnable stop = () -> {
            if (stopped.compareAndSet(false, true)) {
                service.shutdown();
                done.countDown();
            }
        };
        Runtime.getRuntime().addShutdownHook(new Thread(stop, "neo4j-shutdown"));

        int port;
        try {
            // the built-in user starts with password "neo4j" and must change it; set the test
            // password directly (the embedded API runs with full privileges, no login needed)
            GraphDatabaseAPI system =
                    (GraphDatabaseAPI) service.database(GraphDatabaseSettings.SYSTEM_DATABASE_NAME);
            system.executeTransactionally(
                    "ALTER USER neo4j SET PASSWORD $password CHANGE NOT REQUIRED",
                    Map.of("password", password));
            port = system.getDependencyResolver()
                    .resolveDependency(ConnectorPortRegister.class)
                    .getLocalAddress(ConnectorType.BOLT)
                    .getPort();
        } catch (RuntimeException e) {
            // the database threads would keep the JVM alive: stop them, then fail loudly
            e.printStackTrace();
            stop.run();
            System.exit(1);
            return;
        }
        System.out.println("NEO4J_READY bolt://127.0.0.1:" + port);
        System.out.flush();

        Thread watcher = new Thread(() -> {
            InputStream in = System.in;
            byte[] buffer = new byte[256];
            try {
                while (in.read(buffer) >= 0) {
                    // ignore input; only EOF matters
                }
            } catch (IOException ignored) {
                // a broken pipe means the parent is gone: stop as for EOF
            }
            stop.run();
        }, "stdin-watcher");
        watcher.setDaemon(true);
        watcher.start();
        done.await();
        System.exit(0);
    }
}
