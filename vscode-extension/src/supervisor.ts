// Starting, stopping and restarting the language client, with no `vscode` import so `node --test`
// can drive it. vscode-languageclient 9 cannot restart a client whose start failed: its state is
// `startFailed`, `start()` returns the same rejected promise and `stop()` throws ("Client is not
// running and can't be stopped"). So every (re)start makes a new client, and stopping the old one
// may fail without stopping the restart. Restarts are serialised: the last one wins.

/** What the supervisor needs of a LanguageClient. */
export interface ClientLike {
  start(): Promise<void>;
  stop(): Promise<void>;
}

export class ServerSupervisor<C extends ClientLike> {
  private current: C | undefined;
  private queue: Promise<void> = Promise.resolve();

  /**
   * @param create builds a fresh client from the current settings
   * @param report shows why a start failed (the client's own error is passed on)
   */
  constructor(
    private readonly create: () => C,
    private readonly report: (err: unknown) => void,
  ) {}

  /** The client of the last (re)start, running or not. */
  get client(): C | undefined {
    return this.current;
  }

  /** Start a client (the first time) or replace the current one; resolves once it ran or failed. */
  restart(): Promise<void> {
    this.queue = this.queue.then(() => this.replace());
    return this.queue;
  }

  /** Stop the current client, if any (for deactivate). */
  stop(): Promise<void> {
    this.queue = this.queue.then(() => this.stopCurrent());
    return this.queue;
  }

  private async replace(): Promise<void> {
    await this.stopCurrent();
    const next = this.create();
    this.current = next;
    try {
      await next.start();
    } catch (err) {
      this.report(err);
    }
  }

  private async stopCurrent(): Promise<void> {
    const old = this.current;
    this.current = undefined;
    if (!old) {
      return;
    }
    try {
      await old.stop();
    } catch {
      // A client whose start failed cannot be stopped (and has no process to stop).
    }
  }
}
