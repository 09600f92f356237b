// Package subscribers is the registry behind every Subscribe of this module's buses and
// stores: a Set of callbacks, each added by Subscribe and removed by the function it returns.
//
// Publish calls every callback with the lock held, in no particular order, so deliveries never
// overlap, a Subscribe or an unsubscribe waits for the delivery under way, and once an
// unsubscribe returns its callback is not called again. A callback must therefore return
// quickly and must not call Subscribe or an unsubscribe of the same Set: that would deadlock.
// An unsubscribe may be called more than once.
package subscribers
