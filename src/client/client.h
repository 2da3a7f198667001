// The ptyvisor client library: everything a program needs to talk to ptyvisord.
#pragma once

#include "client/blocking.h"
#include "client/client_error.h"
#include "client/connection.h"
#include "client/default_socket.h"
#include "client/events.h"
#include "client/start_options.h"
