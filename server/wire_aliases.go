package server

import (
	"github.com/airlock-sandbox/airlock/server/client"
	"github.com/airlock-sandbox/airlock/server/wire"
)

// The API's JSON types moved to package wire, which a client imports
// without the handler, the session store or the MCP server. These names
// remain for code written against earlier versions.
type (
	// Deprecated: use wire.Result.
	Result = wire.Result
	// Deprecated: use wire.File.
	File = wire.File
	// Deprecated: use wire.ErrorInfo.
	ErrorInfo = wire.ErrorInfo
	// Deprecated: use wire.AuditEvent.
	AuditEvent = wire.AuditEvent
	// Deprecated: use wire.Suspicion.
	Suspicion = wire.Suspicion
	// Deprecated: use wire.Display.
	DisplayJSON = wire.Display
	// Deprecated: use wire.Python.
	Python = wire.Python
	// Deprecated: use wire.RunLimits.
	RunLimits = wire.RunLimits
	// Deprecated: use wire.RunRequest.
	RunRequest = wire.RunRequest
	// Deprecated: use wire.InputFiles.
	InputFiles = wire.InputFiles
	// Deprecated: use wire.SessionRequest.
	SessionRequest = wire.SessionRequest
	// Deprecated: use wire.SessionRunRequest.
	SessionRunRequest = wire.SessionRunRequest
	// Deprecated: use wire.SessionInfo.
	SessionInfo = wire.SessionInfo
	// Deprecated: use wire.SessionResult.
	SessionResult = wire.SessionResult
	// Deprecated: use wire.SessionStatus.
	SessionStatus = wire.SessionStatus
	// Deprecated: use wire.SessionList.
	SessionList = wire.SessionList
)

// The client moved to package client, which imports neither the sandbox
// nor this package.
type (
	// Deprecated: use client.Client.
	Client = client.Client
	// Deprecated: use client.APIError.
	APIError = client.APIError
)
