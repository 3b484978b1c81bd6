"""The controller: replica assignment, leader election and the partition state
machine. On a single node the broker is a controller of one."""
